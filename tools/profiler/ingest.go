package main

import (
	"fmt"
	"io"
	"sort"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/profiler/internal/analysis"
	"trainwire.dev/tools/profiler/internal/classify"
	"trainwire.dev/tools/profiler/internal/trace"
)

// IngestCmd streams traces into normalized event frames.
type IngestCmd struct {
	TraceFlags
	Out   string `short:"o" help:"Output stream of event frames (a file appears only once every trace was read); - is stdout." default:"-" env:"TRAINWIRE_PROFILER_OUT"`
	Count bool   `help:"Write no frames: count the events by format, phase and class and report them on stderr (the parse path alone, as bench/profiler measures it)." env:"TRAINWIRE_PROFILER_COUNT"`
}

// Help is the verb's long help.
func (IngestCmd) Help() string {
	return `Reads Kineto traces of every vintage, legacy autograd-profiler arrays, Horovod
timelines (terminated or not) and BytePS comm traces, one event at a time, and
writes one event frame per event: times in int64 ns (absolute when the trace
says where its clock starts), the event's class in args.class, string pids and
tids in args.pid_name / args.tid_name. Horovod B/E pairs become complete events.
Memory stays flat whatever the file size. A stats frame per file ("ingest")
closes its events: format, rank, events, skipped (by reason).

Exit codes: 0 ok, 1 I/O error, 2 malformed or truncated JSON (the message
names the file and byte offset), 80 usage.`
}

// Run ingests. The stream's end frame (and, with -o, the file) appears
// only when every file was read: a bad file ends it with an error frame
// and no end, so the next tool in the pipe fails too.
func (c *IngestCmd) Run(rio *cli.IO) error {
	cl, err := c.classifier()
	if err != nil {
		return err
	}
	files, err := c.files()
	if err != nil {
		return err
	}
	if c.Count {
		return c.count(rio, files, cl)
	}
	out, err := cli.CreateOutput(c.Out, rio.Stdout)
	if err != nil {
		return err
	}
	defer out.Close()
	w := wire.NewWriter(out, "profiler/"+cli.Version)
	_, err = c.ingest(rio, files, cl, w, nil)
	if err = cli.EndStream(w, err); err != nil {
		return err
	}
	return out.Commit()
}

// ingest reads every file into w, or with w nil counts their events into
// counts; it returns the bytes of JSON read.
func (c *IngestCmd) ingest(rio *cli.IO, files []string, cl *classify.Classifier, w *wire.Writer, counts map[countKey]int64) (int64, error) {
	var bytes int64
	for i, f := range files {
		n, err := c.ingestFile(rio, f, i, cl, w, counts)
		bytes += n
		if err != nil {
			return bytes, err
		}
		if err := rio.Ctx.Err(); err != nil {
			return bytes, err
		}
	}
	return bytes, nil
}

// count is --count: the events by format, phase and class, on stderr.
func (c *IngestCmd) count(rio *cli.IO, files []string, cl *classify.Classifier) error {
	counts := map[countKey]int64{}
	start := time.Now()
	bytes, err := c.ingest(rio, files, cl, nil, counts)
	if err != nil {
		return err
	}
	el := time.Since(start).Seconds()
	keys := make([]countKey, 0, len(counts))
	var total int64
	for k, v := range counts {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if counts[a] != counts[b] {
			return counts[a] > counts[b]
		}
		// ties in a fixed order (map order would shuffle them)
		if a.format != b.format {
			return a.format < b.format
		}
		if a.ph != b.ph {
			return a.ph < b.ph
		}
		return a.class < b.class
	})
	fmt.Fprintf(rio.Stderr, "%-10s %-6s %-12s %12s\n", "format", "phase", "class", "events")
	for _, k := range keys {
		fmt.Fprintf(rio.Stderr, "%-10s %-6c %-12s %12d\n", k.format, k.ph, k.class, counts[k])
	}
	fmt.Fprintf(rio.Stderr, "%d events, %d bytes in %.3f s (%.1f MB/s)\n", total, bytes, el, float64(bytes)/1e6/max(el, 1e-9))
	return nil
}

// ingestFile streams one file; it returns the bytes of JSON read.
// countKey groups events in --count mode.
type countKey struct {
	format trace.Format
	ph     byte
	class  classify.Class
}

func (c *IngestCmd) ingestFile(rio *cli.IO, name string, index int, cl *classify.Classifier, w *wire.Writer, counts map[countKey]int64) (int64, error) {
	in, closeIn, err := trace.Open(name, rio.Stdin)
	if err != nil {
		return 0, err
	}
	defer closeIn()
	base, tailRank := int64(-1), int64(-1)
	if name != "-" {
		base, tailRank = trace.Tail(name)
	}
	tr := trace.NewReader(in, trace.Options{KeepArgs: w != nil, MaxToken: int(c.MaxToken), Workers: c.Workers})
	defer tr.Close()
	info := tr.Info()
	rank, shift, decided := int64(-1), int64(0), false
	decide := func() {
		decided = true
		rank = trace.ResolveRank(c.Rank, info, tailRank, name, index)
		switch {
		case info.BaseNS != 0:
			shift = info.BaseNS
		case base > 0:
			shift = base
		}
	}
	var fr wire.Event
	var local [256][classify.NClasses]int64 // --count: per phase and class
	defer func() {
		for ph := range local {
			for cl, n := range local[ph] {
				if n > 0 {
					counts[countKey{info.Format, byte(ph), classify.Class(cl)}] += n
				}
			}
		}
	}()
	for {
		ev, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tr.Offset(), fmt.Errorf("%s: %w", name, err)
		}
		if !decided {
			decide()
		}
		class := cl.Classify(ev.Name, ev.Cat, ev.Ph)
		if w == nil {
			local[ev.Ph][class]++
			continue
		}
		fr = wire.Event{Name: ev.Name, Cat: ev.Cat, Ph: string(rune(ev.Ph)), Rank: rank, PID: ev.PID, TID: ev.TID,
			Stream: ev.Stream, TS: ev.TS + shift, Dur: ev.Dur, Corr: ev.Corr}
		if ev.Ph == 'M' {
			fr.TS = 0
		}
		args := make(map[string]any, len(ev.Args)+3)
		for _, a := range ev.Args {
			if a.IsNum {
				args[a.Key] = a.Num
			} else {
				args[a.Key] = a.Str
			}
		}
		args[trace.ArgClass] = class.String()
		if ev.PIDName != "" {
			args[trace.ArgPIDName] = ev.PIDName
		}
		if ev.TIDName != "" {
			args[trace.ArgTIDName] = ev.TIDName
		}
		if ev.InNumel >= 0 {
			args[trace.ArgInNumel] = float64(ev.InNumel)
		}
		if ev.Cat == "horovod_tick" {
			args[trace.ArgTick] = ev.Label
		}
		fr.Args = args
		if err := w.Write(&fr); err != nil {
			return tr.Offset(), err
		}
	}
	if !decided {
		decide()
	}
	if info.BaseLate && shift == 0 {
		rio.Log.Warn("baseTimeNanoseconds comes after the events in a compressed or piped trace: times are relative to it", "file", name)
	}
	if w != nil {
		vals := map[string]float64{"events": float64(info.Events), "skipped": float64(info.SkippedTotal()),
			"bytes": float64(tr.Offset()), "base_ns": float64(shift)}
		for k, v := range info.Skipped {
			vals["skipped."+k] = float64(v)
		}
		labels := map[string]string{"file": name, "format": string(info.Format)}
		if info.Unterminated {
			labels["unterminated"] = "true"
		}
		if name != "-" {
			if m := analysis.MetaJSON(name); m != nil {
				labels[analysis.MetaLabel] = string(m)
			}
		}
		if err := w.Write(&wire.Stats{Tool: "profiler", Name: "ingest", Rank: rank, Values: vals, Labels: labels}); err != nil {
			return tr.Offset(), err
		}
	} else if n := info.SkippedTotal(); n > 0 {
		rio.Log.Info("skipped events", "file", name, "count", n, "reasons", info.Skipped)
	}
	if info.Unterminated {
		rio.Log.Warn("trace array has no closing bracket; read up to the last complete event", "file", name)
	}
	return tr.Offset(), nil
}
