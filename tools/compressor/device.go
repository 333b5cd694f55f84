package main

import (
	"fmt"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/gpu"
	"trainwire.dev/lib/wire"
)

// frameEncoder is what `encode` needs of an encoder, on the CPU
// (lib/codec) or on a GPU (lib/gpu, -tags cuda builds): both write the
// same frames byte for byte.
type frameEncoder interface {
	Encode(in codec.Input) (*wire.Compressed, error)
	// SetStore replaces the error-feedback state (--state-in).
	SetStore(st *codec.Store)
	// Store returns the error-feedback state, current (--state-out).
	Store() (*codec.Store, error)
	Close()
}

type cpuEncoder struct{ enc *codec.Encoder }

func (c *cpuEncoder) Encode(in codec.Input) (*wire.Compressed, error) {
	f, _, err := c.enc.Encode(in)
	return f, err
}
func (c *cpuEncoder) SetStore(st *codec.Store)     { c.enc.Store = st }
func (c *cpuEncoder) Store() (*codec.Store, error) { return c.enc.Store, nil }
func (c *cpuEncoder) Close()                       {}

type gpuEncoder struct {
	dev *gpu.Device
	enc *gpu.Encoder
}

func (g *gpuEncoder) Encode(in codec.Input) (*wire.Compressed, error) { return g.enc.Encode(in) }
func (g *gpuEncoder) SetStore(st *codec.Store)                        { g.enc.Store = st }
func (g *gpuEncoder) Store() (*codec.Store, error)                    { return g.enc.Store, g.enc.SyncStore() }
func (g *gpuEncoder) Close() {
	g.enc.Close()
	g.dev.Close()
}

// newEncoder builds the encoder --device asks for. A GPU in a binary
// built without -tags cuda, or a codec or memory without GPU kernels, is
// a usage error (exit 80).
func (c *EncodeCmd) newEncoder(rio *cli.IO) (frameEncoder, error) {
	isGPU, ord, err := gpu.ParseDevice(c.Device)
	if err != nil {
		return nil, cli.WithCode(cli.ExitUsage, err)
	}
	mo := codec.MemoryOptions{Beta: c.Beta, Gamma: c.Gamma, Momentum: c.DGCMom, LR: c.LR}
	if !isGPU {
		cd, err := codec.New(c.Algo, c.Options())
		if err != nil {
			return nil, cli.WithCode(cli.ExitUsage, err)
		}
		mem, err := codec.NewMemory(c.Memory, mo)
		if err != nil {
			return nil, cli.WithCode(cli.ExitUsage, err)
		}
		return &cpuEncoder{&codec.Encoder{Codec: cd, Memory: mem, Store: codec.NewStore()}}, nil
	}
	dev, err := gpu.Open(ord)
	if err != nil {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--device %s: %w", c.Device, err))
	}
	enc, err := gpu.NewEncoder(dev, c.Algo, c.Options(), c.Memory, mo)
	if err != nil {
		dev.Close()
		return nil, cli.WithCode(cli.ExitUsage, err)
	}
	rio.Log.Info("encoding on the GPU", "device", dev.Name(), "algo", c.Algo, "memory", c.Memory)
	return &gpuEncoder{dev: dev, enc: enc}, nil
}
