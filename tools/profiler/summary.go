package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/profiler/internal/analysis"
)

// SummaryCmd runs the analyses.
type SummaryCmd struct {
	TraceFlags
	Format       string  `help:"Report format: table or json." enum:"table,json" default:"table" env:"TRAINWIRE_PROFILER_FORMAT"`
	Report       string  `help:"Write the report to this file instead of stderr (it appears only on success)." env:"TRAINWIRE_PROFILER_REPORT"`
	Frames       bool    `help:"Write stats frames (one per rank and analysis) on stdout (never onto a terminal: the report is there on stderr)." default:"true" negatable:"" env:"TRAINWIRE_PROFILER_FRAMES"`
	KernelWaitUS float64 `name:"kernel-wait-us" help:"A gap shorter than this between events on one lane, with the next launched in time, is kernel wait (HTA's consecutive_kernel_delay)." default:"30" env:"TRAINWIRE_PROFILER_KERNEL_WAIT_US"`
	TopK         int     `help:"Kernels listed per class." default:"5" env:"TRAINWIRE_PROFILER_TOP_K"`
	Instances    bool    `help:"List every matched collective in the JSON report." env:"TRAINWIRE_PROFILER_INSTANCES"`
	Scope        string  `help:"all: every event, exact ns (the default); hta: as Holistic Trace Analysis scopes it, to reproduce its figures — the complete ProfilerSteps only (events starting outside them and the last step dropped), times rounded to whole µs (starts up, ends down)." enum:"all,hta" default:"all" env:"TRAINWIRE_PROFILER_SCOPE"`
}

// Help is the verb's long help.
func (SummaryCmd) Help() string {
	return `Per rank: temporal breakdown (idle / compute / non-compute over the device
timeline: GPU streams, or CPU threads for CPU-only traces), comm/compute overlap,
idle time per lane split into host wait (the next event was launched after the
previous ended), kernel wait (short gap) and other, kernel breakdown by class and
name, launch statistics (runtime call ↔ kernel by correlation id), memory
timeline. Across ranks: collectives matched by process group and sequence number
(or by order), start/end skew, algbw/busbw, and stragglers ranked by the time the
others waited for them in blocking collectives (needs no common clock); Horovod
negotiation: which rank reported tensors ready last.

The report goes to stderr (--format table|json, or --report FILE); stats frames
go to stdout. Exit codes: 0 ok, 1 I/O error, 2 malformed trace, 80 usage.`
}

// Run summarizes.
func (c *SummaryCmd) Run(rio *cli.IO) error {
	ranks, err := c.load(rio)
	if err != nil {
		return err
	}
	if c.Scope == "hta" {
		for _, r := range ranks {
			if !r.ScopeHTA() {
				rio.Log.Warn("--scope hta: fewer than two ProfilerSteps; this rank is analysed whole", "rank", r.Rank)
			}
		}
	}
	o := analysis.DefaultOptions
	o.KernelWaitNS = int64(c.KernelWaitUS * 1000)
	o.TopK = c.TopK
	s := analysis.Summarize(ranks, o)
	if !c.Instances && s.Collectives != nil {
		s.Collectives.Instances = nil
	}
	rep, err := cli.CreateOutput(c.Report, rio.Stderr)
	if err != nil {
		return err
	}
	defer rep.Close() // removes the report file unless it was written whole
	if c.Format == "json" {
		enc := json.NewEncoder(rep)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			return err
		}
	} else if err := writeTable(rep, s); err != nil {
		return err
	}
	if err := rep.Commit(); err != nil {
		return err
	}
	if c.Frames && !cli.IsTerminal(rio.Stdout) {
		w := wire.NewWriter(rio.Stdout, "profiler/"+cli.Version)
		for _, f := range statsFrames(s) {
			if err := w.Write(f); err != nil {
				return cli.EndStream(w, err)
			}
		}
		return w.Close()
	}
	return nil
}

func ms(ns int64) string    { return strconv.FormatFloat(float64(ns)/1e6, 'f', 3, 64) }
func msf(ns float64) string { return strconv.FormatFloat(ns/1e6, 'f', 3, 64) }

func writeTable(w io.Writer, s *analysis.Summary) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	p := func(format string, a ...any) { fmt.Fprintf(tw, format, a...) }
	p("TEMPORAL BREAKDOWN (ms)\nrank\tformat\tdevice\tspan\tidle\tcompute\tnon-compute\tcomm\toverlap %%\titers\titer mean\n")
	for _, r := range s.Ranks {
		t := r.Temporal
		ov := "-"
		if r.Overlap.Pct != nil {
			ov = strconv.FormatFloat(*r.Overlap.Pct, 'f', 1, 64)
		}
		p("%d\t%s\t%s\t%s\t%s (%.1f%%)\t%s (%.1f%%)\t%s (%.1f%%)\t%s\t%s\t%d\t%s\n", r.Rank, r.Format, r.Device, ms(t.SpanNS),
			ms(t.IdleNS), t.IdlePct, ms(t.ComputeNS), t.ComputePct, ms(t.NonComputeNS), t.NonComputePct, ms(t.CommNS), ov,
			r.Iterations.Count, ms(r.Iterations.MeanNS))
	}
	p("\nIDLE TIME (ms)\nrank\tlane\thost wait\tkernel wait\tother\tgaps\n")
	for _, r := range s.Ranks {
		for _, l := range r.Idle {
			if l.Gaps == 0 {
				continue
			}
			p("%d\t%s\t%s\t%s\t%s\t%d\n", r.Rank, l.Lane, ms(l.HostWaitNS), ms(l.KernelWaitNS), ms(l.OtherNS), l.Gaps)
		}
	}
	p("\nKERNELS (top per class)\nrank\tclass\tcount\ttotal ms\tmean ms\tname\n")
	for _, r := range s.Ranks {
		for _, k := range r.Kernels {
			p("%d\t%s\t%d\t%s\t%s\t%s\n", r.Rank, k.Class, k.Count, ms(k.SumNS), msf(k.MeanNS), clip(k.Name, 70))
		}
	}
	launched := false
	for _, r := range s.Ranks {
		if r.Launch == nil {
			continue
		}
		if !launched {
			p("\nLAUNCHES\nrank\tpairs\tcpu mean ms\tgpu mean ms\tdelay mean ms\tdelay max ms\tshort kernels\tdelay outliers\tnegative delays (clipped)\n")
			launched = true
		}
		l := r.Launch
		p("%d\t%d\t%s\t%s\t%s\t%s\t%d\t%d\t%d\n", r.Rank, l.Pairs, msf(l.CPUMeanNS), msf(l.GPUMeanNS), msf(l.DelayMeanNS), ms(l.DelayMaxNS), l.ShortKernels, l.LaunchDelayOutliers, l.NegativeDelays)
	}
	memd := false
	for _, r := range s.Ranks {
		for _, m := range r.Memory {
			if !memd {
				p("\nMEMORY\nrank\tdevice\tevents\tpeak MiB\treserved at peak MiB\tfragmentation\n")
				memd = true
			}
			p("%d\t%d\t%d\t%.2f\t%.2f\t%.1f%%\n", r.Rank, m.Device, m.Events, float64(m.PeakBytes)/(1<<20), float64(m.ReservedAtPeak)/(1<<20), m.FragAtPeak*100)
		}
	}
	if c := s.Collectives; c != nil {
		p("\nCOLLECTIVES (matched by %s, %s clocks): %d matched, %d unmatched; start skew mean %s ms max %s ms; end skew mean %s ms max %s ms\n",
			c.MatchedBy, c.Clock, c.Matched, c.Unmatched, msf(c.StartSkewMean), ms(c.StartSkewMax), msf(c.EndSkewMean), ms(c.EndSkewMax))
		p("op\tbytes\tcount\ttime ms\talgbw GB/s\tbusbw GB/s\n")
		for _, o := range c.Ops {
			if o.Bytes <= 0 { // no size in the trace: no bandwidth either
				p("%s\tunknown\t%d\t%s\t-\t-\n", o.Op, o.Count, msf(o.TimeNS))
				continue
			}
			p("%s\t%d\t%d\t%s\t%.3f\t%.3f\n", o.Op, o.Bytes, o.Count, msf(o.TimeNS), o.AlgBWGBps, o.BusBWGBps)
		}
	}
	if len(s.Stragglers) > 0 {
		p("\nSTRAGGLERS (most waited-for first)\nrank\twait caused mean ms\tlast starts\tcollectives\n")
		for _, st := range s.Stragglers {
			p("%d\t%s\t%d\t%d\n", st.Rank, msf(st.WaitCausedNS), st.LastStarts, st.Collectives)
		}
	}
	if n := s.Negotiation; n != nil {
		p("\nHOROVOD NEGOTIATION (%d rounds)\nrank\tlast to report\tlate mean ms\n", n.Rounds)
		for _, r := range n.Ranks {
			p("%d\t%d\t%s\n", r.Rank, r.Last, msf(r.LateMeanNS))
		}
	}
	return tw.Flush()
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// statsFrames turns the summary into stats frames, one per rank and analysis.
func statsFrames(s *analysis.Summary) []wire.Frame {
	var out []wire.Frame
	add := func(name string, rank int64, v map[string]float64, l map[string]string) {
		out = append(out, &wire.Stats{Tool: "profiler", Name: name, Rank: rank, Values: v, Labels: l})
	}
	for _, r := range s.Ranks {
		t := r.Temporal
		add("temporal", r.Rank, map[string]float64{"span_ns": float64(t.SpanNS), "idle_ns": float64(t.IdleNS),
			"compute_ns": float64(t.ComputeNS), "non_compute_ns": float64(t.NonComputeNS), "comm_ns": float64(t.CommNS),
			"memory_ns": float64(t.MemoryNS), "iterations": float64(r.Iterations.Count), "iter_mean_ns": float64(r.Iterations.MeanNS)},
			map[string]string{"format": r.Format, "device": r.Device, "clock": r.Clock})
		ov := map[string]float64{"comm_ns": float64(r.Overlap.CommNS), "overlap_ns": float64(r.Overlap.OverlapNS)}
		if r.Overlap.Pct != nil {
			ov["pct"] = *r.Overlap.Pct
		}
		add("overlap", r.Rank, ov, nil)
		for _, l := range r.Idle {
			add("idle", r.Rank, map[string]float64{"host_wait_ns": float64(l.HostWaitNS), "kernel_wait_ns": float64(l.KernelWaitNS),
				"other_ns": float64(l.OtherNS), "gaps": float64(l.Gaps)}, map[string]string{"lane": l.Lane})
		}
		for _, k := range r.Kernels {
			add("kernel", r.Rank, map[string]float64{"count": float64(k.Count), "sum_ns": float64(k.SumNS), "mean_ns": k.MeanNS,
				"std_ns": k.StdNS, "min_ns": float64(k.MinNS), "max_ns": float64(k.MaxNS)}, map[string]string{"name": k.Name, "class": k.Class})
		}
		if l := r.Launch; l != nil {
			add("launch", r.Rank, map[string]float64{"pairs": float64(l.Pairs), "cpu_mean_ns": l.CPUMeanNS, "gpu_mean_ns": l.GPUMeanNS,
				"launch_delay_mean_ns": l.DelayMeanNS, "launch_delay_max_ns": float64(l.DelayMaxNS), "short_kernels": float64(l.ShortKernels),
				"negative_delays": float64(l.NegativeDelays)}, nil)
		}
		for _, m := range r.Memory {
			add("memory", r.Rank, map[string]float64{"device": float64(m.Device), "peak_bytes": float64(m.PeakBytes),
				"reserved_at_peak_bytes": float64(m.ReservedAtPeak), "frag_at_peak": m.FragAtPeak}, nil)
		}
	}
	if c := s.Collectives; c != nil {
		for _, o := range c.Ops {
			add("collective", -1, map[string]float64{"bytes": float64(o.Bytes), "count": float64(o.Count), "ns": o.TimeNS,
				"algbw_gbps": o.AlgBWGBps, "busbw_gbps": o.BusBWGBps, "start_skew_mean_ns": c.StartSkewMean, "end_skew_mean_ns": c.EndSkewMean},
				map[string]string{"op": o.Op, "matched_by": c.MatchedBy})
		}
	}
	for i, st := range s.Stragglers {
		add("straggler", st.Rank, map[string]float64{"place": float64(i + 1), "wait_caused_mean_ns": st.WaitCausedNS,
			"last_starts": float64(st.LastStarts), "collectives": float64(st.Collectives)}, nil)
	}
	if n := s.Negotiation; n != nil {
		for _, r := range n.Ranks {
			add("negotiation", r.Rank, map[string]float64{"last": float64(r.Last), "late_mean_ns": r.LateMeanNS, "rounds": float64(n.Rounds)}, nil)
		}
	}
	return out
}
