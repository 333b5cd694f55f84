package main

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/sched"
)

// ScheduleCmd is `ckpt schedule`: Algorithm 6.2 on given or profiled spans.
type ScheduleCmd struct {
	cli.WireFlags
	Spans     []float64    `help:"Idle spans of one iteration, in seconds, in order (the last is treated as unbounded)."`
	Trace     string       `help:"Derive the spans from a trainwire event stream (profiler ingest output, or events recorded online): comm spans are busy, iterations are ProfilerStep* spans (or the whole trace)." type:"path"`
	Rank      int          `help:"With --trace, use only this rank's events (-1: all)." default:"-1"`
	Size      cli.ByteSize `required:"" help:"Checkpoint (one rank's shard) size C, e.g. 512MiB, 0.5GB."`
	M         int          `name:"m" default:"2" help:"Replicas including the local one (m−1 are sent)."`
	Buffer    cli.ByteSize `help:"Receiver buffer R reserved for checkpoint traffic (thesis: 128 MB)." default:"128MiB"`
	Parts     int          `help:"Sub-buffers p of R (chunks are at most R/p; thesis: 4)." default:"4"`
	Bandwidth cli.ByteSize `help:"Link bandwidth B in bytes per second (e.g. 1.25GB for 10 Gbit/s)." required:""`
	Alpha     float64      `help:"Per-chunk start-up time α in seconds." default:"0.0005"`
	Mu        float64      `help:"Share μ of each span to use, in (0,1]." default:"0.9"`
	Format    string       `help:"Output: table or json." enum:"table,json" default:"table"`
}

// Run prints the chunks (span, destination, offset, size) and the overflow.
func (c *ScheduleCmd) Run(rio *cli.IO) error {
	spans := c.Spans
	var prof *sched.Profile
	if c.Trace != "" {
		var err error
		prof, err = profileTrace(c.Trace, rio, c.Limits(), c.Rank)
		if err != nil {
			return err
		}
		spans = prof.Spans
		if !prof.Stable() {
			rio.Log.Warn("idle spans vary by more than 10% across iterations; the plan may not hold", "norm_std", prof.NormStd, "iters", prof.Iters)
		}
	}
	if len(spans) == 0 {
		return cli.WithCode(cli.ExitUsage, errors.New("give the idle spans with --spans or --trace"))
	}
	bc, s, err := sched.PartitionBytes(spans, sched.Params{Size: float64(c.Size), Replicas: c.M, Buffer: float64(c.Buffer), Parts: c.Parts, Bandwidth: float64(c.Bandwidth), Alpha: c.Alpha, Mu: c.Mu})
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	if s.Overflow > 0 {
		rio.Log.Warn("the checkpoint does not fit in the idle spans: the rest goes in the last span and prolongs the iteration; lower the checkpoint frequency", "overflow_bytes", int64(s.Overflow))
	}
	if c.Format == "json" {
		return writeJSON(rio.Stdout, map[string]any{"spans": spans, "profile": prof, "chunks": bc, "per_span": s.PerSpan, "overflow": s.Overflow})
	}
	tw := tabwriter.NewWriter(rio.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "%d chunks for %d remote replica(s) of %d bytes; overflow %d bytes\n", len(bc), c.M-1, int64(c.Size), int64(s.Overflow))
	fmt.Fprintln(tw, "span\tspan s\tdest\toffset\tsize")
	for _, ch := range bc {
		sp := "∞"
		if ch.Span < len(spans)-1 {
			sp = fmt.Sprintf("%.6g", spans[ch.Span])
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\n", ch.Span, sp, ch.Dest, ch.Offset, ch.Size)
	}
	return tw.Flush()
}

// profileTrace derives the mean idle spans from an event stream.
func profileTrace(path string, rio *cli.IO, lim wire.Limits, rank int) (*sched.Profile, error) {
	var comm []sched.Interval
	var iters []sched.Interval
	lo, hi := math.Inf(1), math.Inf(-1)
	err := cli.EachFrame([]string{path}, rio.Stdin, lim, false, func(f wire.Frame) error {
		e, ok := f.(*wire.Event)
		if !ok || e.Ph != "X" || (rank >= 0 && e.Rank != int64(rank)) {
			return nil
		}
		iv := sched.Interval{Start: float64(e.TS) / 1e9, End: float64(e.TS+e.Dur) / 1e9}
		switch {
		case strings.HasPrefix(e.Name, "ProfilerStep") || e.Cat == "iteration":
			iters = append(iters, iv)
		case e.Cat == "comm":
			comm = append(comm, iv)
		default:
			return nil
		}
		lo, hi = math.Min(lo, iv.Start), math.Max(hi, iv.End)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(comm) == 0 {
		return nil, cli.WithCode(cli.ExitBadInput, fmt.Errorf("%s: no comm spans (events with cat \"comm\", ph \"X\") to profile", path))
	}
	if len(iters) == 0 {
		iters = []sched.Interval{{Start: lo, End: hi}}
	}
	sort.Slice(iters, func(i, j int) bool { return iters[i].Start < iters[j].Start })
	var per [][]sched.Interval
	for _, it := range iters {
		per = append(per, sched.IdleIntervals(it.Start, it.End, comm))
	}
	return sched.AverageIntervals(per)
}
