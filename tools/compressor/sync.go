package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/csync"
)

// SyncCmd is the filter: this rank's gradients in, the sums out, each
// tensor (or fusion group) compressed with error feedback, exchanged by a
// collective, decoded and summed.
type SyncCmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`
	cli.WireFlags
	SyncFlags `embed:""`

	Average bool   `help:"Divide every sum by the world size (after summing: sum · float32(1/world))." env:"TRAINWIRE_AVERAGE"`
	Stats   string `help:"Write a stats frame per batch (a step's tensors, synced together) to this file (- for stderr): bytes sent and received per phase, times, units." type:"path" env:"TRAINWIRE_STATS"`

	CPUProfile string `name:"cpu-profile" help:"Write a Go CPU profile of this rank to this file (go tool pprof)." type:"path" env:"TRAINWIRE_CPU_PROFILE"`
}

// fusing is a fusion group being collected from the input.
type fusing struct {
	members []string
	got     map[string]*wire.Dense
	step    int64
}

// Run synchronises every dense f32 frame of stdin and writes each sum to
// stdout, flushed, as soon as it has it; step ends pass through in order.
func (c *SyncCmd) Run(rio *cli.IO) error {
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("sync: %w", err))
	}
	rn, hello, err := c.runner(c.Limits())
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	hello = append(hello, fmt.Sprint("average=", c.Average))
	stopProfile, err := cli.StartCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	var statsW *wire.Writer
	if c.Stats != "" {
		var out io.Writer = rio.Stderr
		if c.Stats != "-" {
			f, err := os.Create(c.Stats)
			if err != nil {
				return err
			}
			defer f.Close()
			out = f
		}
		statsW = wire.NewWriter(out, "compressor sync")
	}
	m, err := mesh.Open(rio.Ctx, c.Mesh.Config(env, rio.Log))
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := csync.New(rio.Ctx, m, hello)
	if err != nil {
		return err
	}
	s.MaxBytes = int64(c.MaxPayload)
	s.NoOverlap = c.NoOverlap
	rn.S = s
	closeInter, err := c.setupHier(rio.Ctx, env, c.Mesh.Config(env, rio.Log), rn, hello)
	defer closeInter()
	if err != nil {
		return err
	}
	if err := c.readState(rio, rn, c.Limits()); err != nil {
		m.Abort(fmt.Errorf("rank %d: %w", m.Rank(), err))
		return err
	}
	rank, world := m.Rank(), m.World()
	rio.Log.Debug("sync: mesh up", "rank", rank, "world", world, "transport", m.Transport())

	ctx, cancel := context.WithCancel(rio.Ctx)
	defer cancel()
	rd := startReader(ctx, rio.Stdin, c.Limits())
	w := wire.NewWriter(rio.Stdout, "compressor sync")
	lp := &syncLoop{c: c, rn: rn, m: m, w: w, statsW: statsW, rank: rank, world: world,
		groups: map[int]*fusing{}, total: map[string]int64{}, inputs: &rd.pool}
	if err := lp.run(ctx, rd); err != nil {
		return err
	}
	finish := s.Finish
	if rn.H != nil {
		finish = rn.H.Finish
	}
	if err := finish(ctx); err != nil {
		return err
	}
	total, syncTime, n := lp.total, lp.syncTime, lp.n
	if err := w.Close(); err != nil {
		return err
	}
	if statsW != nil {
		if err := statsW.Close(); err != nil {
			return err
		}
	}
	phases := make([]string, 0, len(total))
	for ph := range total {
		phases = append(phases, ph)
	}
	sort.Strings(phases)
	args := []any{"rank", rank, "world", world, "units", n, "sync_s", syncTime.Seconds()}
	for _, ph := range phases {
		args = append(args, "sent_"+ph, total[ph])
	}
	rio.Log.Info("sync: done", args...)
	if c.StateOut != "" {
		if err := writeState(rio, c.StateOut, s.Store, c.Algo); err != nil {
			return err
		}
	}
	return m.Close()
}
