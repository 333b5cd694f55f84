package main

import (
	"fmt"
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// EncodeCmd compresses dense f32 frames with error feedback.
type EncodeCmd struct {
	cli.WireFlags
	CodecFlags
	DeviceFlags
	Algo     string   `help:"Algorithm (see compressor list)." required:"" env:"TRAINWIRE_COMPRESSOR_ALGO"`
	Memory   string   `help:"Error feedback: none, residual, dgc, efsignsgd or powersgd." enum:"none,residual,dgc,efsignsgd,powersgd" default:"none" env:"TRAINWIRE_COMPRESSOR_MEMORY"`
	Beta     float64  `help:"residual: p = β·e + γ·g, β." default:"1"`
	Gamma    float64  `help:"residual: p = β·e + γ·g, γ." default:"1"`
	DGCMom   float64  `name:"dgc-momentum" help:"dgc memory: momentum m of u = m·u + g." default:"0.9"`
	LR       float64  `help:"efsignsgd memory: p = e + lr·g." default:"1"`
	StateIn  string   `help:"Read the error-feedback state (a stream written by --state-out) before encoding." type:"path" env:"TRAINWIRE_COMPRESSOR_STATE_IN"`
	StateOut string   `help:"Write the error-feedback state as a stream (dense frames named TENSOR@SLOT) after encoding." type:"path" env:"TRAINWIRE_COMPRESSOR_STATE_OUT"`
	Files    []string `arg:"" optional:"" help:"Input streams; - or none for stdin." type:"path"`
}

// Run compresses every dense frame of the input; other frames pass through.
func (c *EncodeCmd) Run(rio *cli.IO) error {
	enc, err := c.newEncoder(rio)
	if err != nil {
		return err
	}
	defer enc.Close()
	if c.StateIn != "" {
		if err := c.readState(rio, enc); err != nil {
			return err
		}
	}
	w := wire.NewWriter(rio.Stdout, rio.Tool+"/"+cli.Version)
	w.SetMeta(map[string]string{"algo": c.Algo, "memory": c.Memory})
	var in, out int64
	err = cli.EachFrame(c.Files, rio.Stdin, c.Limits(), false, func(f wire.Frame) error {
		d, ok := f.(*wire.Dense)
		if !ok {
			return w.Write(f)
		}
		if d.DType != wire.F32 {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("encode: tensor %q is %s, want f32", d.Name, d.DType))
		}
		x, err := d.F32()
		if err != nil {
			return cli.WithCode(cli.ExitBadInput, err)
		}
		cf, err := enc.Encode(codec.Input{Name: d.Name, Step: d.Step, Rank: d.Rank, Shape: d.Shape, Data: x})
		if err != nil {
			return err
		}
		in += int64(len(d.Data))
		for _, p := range cf.Parts {
			out += int64(len(p.Data))
		}
		return w.Write(cf)
	})
	if err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if in > 0 {
		rio.Log.Info("encoded", "algo", c.Algo, "memory", c.Memory, "device", c.Device, "frames", w.Count(), "bytes_in", in, "bytes_out", out, "ratio", float64(out)/float64(in))
	}
	if c.StateOut != "" {
		st, err := enc.Store()
		if err != nil {
			return err
		}
		return writeFileAtomic(c.StateOut, func(f io.Writer) error {
			sw := wire.NewWriter(f, rio.Tool+"/"+cli.Version)
			sw.SetMeta(map[string]string{"kind": "compressor-state", "algo": c.Algo, "memory": c.Memory})
			if err := st.WriteTo(sw); err != nil {
				return err
			}
			return sw.Close()
		})
	}
	return nil
}

func (c *EncodeCmd) readState(rio *cli.IO, enc frameEncoder) error {
	f, closeF, err := cli.OpenInput(c.StateIn, rio.Stdin)
	if err != nil {
		return err
	}
	defer closeF()
	st, err := codec.ReadStore(wire.NewReader(f, c.Limits()))
	if err != nil {
		return fmt.Errorf("--state-in %s: %w", c.StateIn, err)
	}
	enc.SetStore(st)
	rio.Log.Debug("state read", "tensors", st.Len())
	return nil
}
