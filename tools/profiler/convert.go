package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strconv"

	"trainwire.dev/lib/cli"
)

// ConvertCmd converts traces for viewers.
type ConvertCmd struct {
	TraceFlags
	To  string `help:"Target: perfetto (Chrome JSON as Perfetto's importer reads it: one process per rank, one track per lane, ns-precise times, class in args)." enum:"perfetto" default:"perfetto" env:"TRAINWIRE_PROFILER_TO"`
	Out string `short:"o" help:"Output file (appears only once the whole trace is written); - is stdout." default:"-" env:"TRAINWIRE_PROFILER_OUT"`
}

// Help is the verb's long help.
func (ConvertCmd) Help() string {
	return `Merges the ranks into one trace that ui.perfetto.dev opens: pid = rank (named
"rank N"), tid = lane (named "stream 7", "thread 1", a Horovod tensor...), every
complete event with its class, iterations as a track of their own, memory as a
counter track. Times are µs with ns decimals on a common clock where the traces
have one (legacy traces keep their own zeros).

Exit codes: 0 ok, 1 error, 2 malformed trace, 80 usage.`
}

// Run converts.
func (c *ConvertCmd) Run(rio *cli.IO) error {
	ranks, err := c.load(rio)
	if err != nil {
		return err
	}
	out, err := cli.CreateOutput(c.Out, rio.Stdout)
	if err != nil {
		return err
	}
	defer out.Close() // removes the file unless the whole trace was written
	bw := bufio.NewWriterSize(out, 1<<16)
	us := func(ns int64) string { return strconv.FormatFloat(float64(ns)/1e3, 'f', 3, 64) }
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	fmt.Fprintf(bw, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":\"trainwire profiler\"},\"traceEvents\":[\n")
	first := true
	emit := func(format string, a ...any) {
		if !first {
			bw.WriteString(",\n")
		}
		first = false
		fmt.Fprintf(bw, format, a...)
	}
	for _, r := range ranks {
		pid := r.Rank
		emit(`{"ph":"M","name":"process_name","pid":%d,"tid":0,"args":{"name":%s}}`, pid, q(fmt.Sprintf("rank %d (%s, %s clock)", r.Rank, r.Format, r.Clock)))
		emit(`{"ph":"M","name":"process_sort_index","pid":%d,"tid":0,"args":{"sort_index":%d}}`, pid, r.Rank)
		stepTID := len(r.Lanes) + 1
		for i, l := range r.Lanes {
			emit(`{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":%s}}`, pid, i+1, q(l))
		}
		if len(r.Steps) > 0 {
			emit(`{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"args":{"name":"iterations"}}`, pid, stepTID)
			for _, s := range r.Steps {
				emit(`{"ph":"X","name":%s,"cat":"step","pid":%d,"tid":%d,"ts":%s,"dur":%s}`, q(s.Name), pid, stepTID, us(s.TS), us(s.Dur()))
			}
		}
		for i := range r.Spans {
			s := &r.Spans[i]
			if s.Name != "" && len(r.Steps) > 0 && s.Class.String() == "annotation" && len(s.Name) > 13 && s.Name[:13] == "ProfilerStep#" {
				continue
			}
			emit(`{"ph":"X","name":%s,"cat":%q,"pid":%d,"tid":%d,"ts":%s,"dur":%s,"args":{"class":%q,"gpu":%t}}`,
				q(s.Name), s.Class.String(), pid, s.Lane+1, us(s.TS), us(s.Dur()), s.Class.String(), s.GPU)
		}
		for _, m := range r.Mem {
			emit(`{"ph":"C","name":"memory (device %d)","pid":%d,"ts":%s,"args":{"allocated":%d}}`, m.Device, pid, us(m.TS), m.Allocated)
		}
		if err := rio.Ctx.Err(); err != nil {
			return err
		}
	}
	fmt.Fprintf(bw, "\n]}\n")
	if err := bw.Flush(); err != nil {
		return err
	}
	return out.Commit()
}
