package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"slices"
	"sort"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/tensor"
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
	Stats   string `help:"Write a stats frame per tensor (or group) and step to this file (- for stderr): bytes sent and received per phase, times." type:"path" env:"TRAINWIRE_STATS"`

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
	if c.CPUProfile != "" {
		f, err := os.Create(c.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
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
	rn.S = s
	if err := c.readState(rio, rn, c.Limits()); err != nil {
		m.Abort(fmt.Errorf("rank %d: %w", m.Rank(), err))
		return err
	}
	rank, world := m.Rank(), m.World()
	rio.Log.Debug("sync: mesh up", "rank", rank, "world", world, "transport", m.Transport())

	// The reader decodes frame i+1 while tensor i is on the network.
	type item struct {
		f   wire.Frame
		err error
	}
	items := make(chan item, 1)
	ctx, cancel := context.WithCancel(rio.Ctx)
	defer cancel()
	go func() {
		defer close(items)
		rd := wire.NewReader(rio.Stdin, c.Limits())
		for {
			f, err := rd.NextFrame()
			if err == io.EOF {
				return
			}
			switch f.(type) {
			case *wire.Header, *wire.End:
				continue
			}
			if err != nil {
				err = cli.WithCode(cli.ExitBadInput, fmt.Errorf("sync: input: %w", err))
			}
			select {
			case items <- item{f, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()

	w := wire.NewWriter(rio.Stdout, "compressor sync")
	groups := map[int]*fusing{}
	total := map[string]int64{}
	var syncTime time.Duration
	n := 0
	bad := func(err error) error {
		m.Abort(fmt.Errorf("rank %d: bad input: %w", rank, err))
		return cli.WithCode(cli.ExitBadInput, err)
	}
	syncGroup := func(step int64, frames []*wire.Dense) error {
		ts := make([]csync.Tensor, len(frames))
		for i, d := range frames {
			x, err := d.F32()
			if err != nil {
				return bad(err)
			}
			ts[i] = csync.Tensor{Name: d.Name, Shape: d.Shape, Data: x}
		}
		t0 := time.Now()
		res, st, err := rn.SyncGroup(ctx, step, ts)
		if err != nil {
			return err
		}
		syncTime += time.Since(t0)
		for i, d := range frames {
			if c.Average {
				tensor.Scale(res[i], 1/float32(world))
			}
			out := wire.NewDenseF32(d.Name, res[i], d.Shape...)
			out.Step, out.Rank = d.Step, int64(rank)
			if err := w.Write(out); err != nil {
				return err
			}
		}
		for ph, b := range st.Sent {
			total[ph] += b
		}
		if statsW != nil {
			names := make([]string, len(frames))
			for i, d := range frames {
				names[i] = d.Name
			}
			if err := statsW.Write(csync.StatsFrame(csync.GroupName(names), step, rank, st)); err != nil {
				return err
			}
			if err := statsW.Flush(); err != nil {
				return err
			}
		}
		n++
		return w.Flush()
	}
	// A peer that dies while this rank waits for input must still end it.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
loop:
	for {
		var it item
		var ok bool
		select {
		case it, ok = <-items:
		case <-tick.C:
			if err := m.Err(); err != nil {
				return fmt.Errorf("sync: waiting for input: %w", err)
			}
			continue
		}
		if !ok {
			break loop
		}
		if it.err != nil {
			return bad(it.err)
		}
		switch f := it.f.(type) {
		case *wire.StepEnd:
			if err := unfinished(groups); err != nil {
				return bad(fmt.Errorf("sync: step %d ended: %w", f.Step, err))
			}
			if err := w.EndStep(f.Step); err != nil {
				return err
			}
			if statsW != nil {
				if err := statsW.EndStep(f.Step); err != nil {
					return err
				}
			}
			if err := w.Flush(); err != nil {
				return err
			}
		case *wire.Dense:
			if f.DType != wire.F32 {
				return bad(fmt.Errorf("sync: tensor %q is %s, want f32", f.Name, f.DType))
			}
			g, members, fused, err := rn.Plan.GroupOf(f.Name)
			if err != nil {
				return bad(err)
			}
			if !fused {
				if err := syncGroup(f.Step, []*wire.Dense{f}); err != nil {
					return err
				}
				continue
			}
			p := groups[g]
			if p == nil {
				p = &fusing{members: members, got: map[string]*wire.Dense{}, step: f.Step}
				groups[g] = p
			}
			if _, dup := p.got[f.Name]; dup {
				return bad(fmt.Errorf("sync: tensor %q twice in a step", f.Name))
			}
			if f.Step != p.step {
				return bad(fmt.Errorf("sync: tensor %q is step %d, the rest of its fusion group step %d", f.Name, f.Step, p.step))
			}
			p.got[f.Name] = f
			if len(p.got) < len(p.members) {
				continue
			}
			delete(groups, g)
			frames := make([]*wire.Dense, len(p.members))
			for i, name := range p.members {
				frames[i] = p.got[name]
			}
			if err := syncGroup(p.step, frames); err != nil {
				return err
			}
		default:
			return bad(fmt.Errorf("sync: input frame %s: compressor sync reads dense f32 tensor frames", it.f.Type()))
		}
	}
	if err := unfinished(groups); err != nil {
		return bad(fmt.Errorf("sync: input ended: %w", err))
	}
	if err := s.Finish(ctx); err != nil {
		return err
	}
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

// incomplete names a fusion group some of whose tensors have not come.
func unfinished(groups map[int]*fusing) error {
	if len(groups) == 0 {
		return nil
	}
	gs := make([]int, 0, len(groups))
	for g := range groups {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	p := groups[gs[0]]
	var missing []string
	for _, name := range p.members {
		if _, ok := p.got[name]; !ok {
			missing = append(missing, name)
		}
	}
	return fmt.Errorf("fusion group %d (%s) is missing %d of its %d tensors: %v", gs[0], csync.GroupName(p.members), len(missing), len(p.members), missing)
}
