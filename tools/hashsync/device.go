package main

import (
	"fmt"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/gpu"
	"trainwire.dev/lib/zen"
)

// gpuHasher runs zen's push partition (Algorithm 1: atomicCAS into the
// parallel memory, serial memory, overflow list) on a GPU through lib/gpu.
// Its parts hold the same positions as lib/zen's on the CPU (lib/gpu's
// TestZenReferencesMatchLibZen ties the two); only the order within a part
// differs, which the servers' rank-ordered sums do not see.
type gpuHasher struct {
	dev   *gpu.Device
	parts zen.Parts
}

// Hash partitions idx on the device.
func (g *gpuHasher) Hash(idx []uint32, cfg zen.HashConfig) (*zen.Parts, error) {
	if len(idx) == 0 {
		g.parts = zen.Parts{Off: make([]int, cfg.N+1)}
		return &g.parts, nil
	}
	p, err := g.dev.ZenHash(idx, gpu.ZenConfig{N: cfg.N, Seeds: cfg.Seeds, C: cfg.C, R2: cfg.R2})
	if err != nil {
		return nil, fmt.Errorf("hashing %d rows on %s: %w", len(idx), g.dev.Name(), err)
	}
	g.parts = zen.Parts{Off: p.Off, Pos: p.Pos, Serial: p.Serial, Overflow: p.Overflow}
	return &g.parts, nil
}

// hashesOnDevice are the schemes whose preparation is Algorithm 1, the part
// --device gpu moves to the GPU.
var hashesOnDevice = map[string]bool{"zen": true, "bp-coo": true, "auto": true}

// openDevice opens the GPU --device names, or returns nil for the CPU. A
// GPU in a binary built without -tags cuda, or with a scheme or
// partitioner that does not hash, is a usage error (exit 80).
func (c *SyncCmd) openDevice() (*gpu.Device, error) {
	isGPU, ord, err := gpu.ParseDevice(c.Device)
	if err != nil || !isGPU {
		return nil, cli.WithCode(cli.ExitUsage, err)
	}
	switch {
	case !hashesOnDevice[c.Scheme]:
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--device %s: scheme %s does not hash; only zen, bp-coo and auto run Algorithm 1 on the GPU", c.Device, c.Scheme))
	case c.Partitioner == "bucket":
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--device %s: --partitioner %s runs on the CPU; the GPU runs Algorithm 1 (--partitioner hash)", c.Device, c.Partitioner))
	}
	dev, err := gpu.Open(ord)
	if err != nil {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--device %s: %w", c.Device, err))
	}
	return dev, nil
}
