package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"trainwire.dev/lib/cli"
)

// writeMetrics writes a Prometheus textfile atomically (cli.CreateAtomic),
// keeping the last success time of a previous successful run.
func writeMetrics(path, verb string, start time.Time, ok bool, bytes, iter int64) error {
	name := "ckpt_" + verb
	lastOK := float64(0)
	if b, err := os.ReadFile(path); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, found := strings.CutPrefix(l, name+"_last_success_timestamp_seconds "); found {
				lastOK, _ = strconv.ParseFloat(v, 64)
			}
		}
	}
	now := time.Now()
	success := 0
	if ok {
		success, lastOK = 1, float64(now.UnixNano())/1e9
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# HELP %s_last_success_timestamp_seconds Unix time of the last successful ckpt %s.\n# TYPE %s_last_success_timestamp_seconds gauge\n%s_last_success_timestamp_seconds %.3f\n", name, verb, name, name, lastOK)
	fmt.Fprintf(&b, "# HELP %s_last_run_timestamp_seconds Unix time the last ckpt %s ended.\n# TYPE %s_last_run_timestamp_seconds gauge\n%s_last_run_timestamp_seconds %.3f\n", name, verb, name, name, float64(now.UnixNano())/1e9)
	fmt.Fprintf(&b, "# HELP %s_success Whether the last ckpt %s succeeded.\n# TYPE %s_success gauge\n%s_success %d\n", name, verb, name, name, success)
	fmt.Fprintf(&b, "# HELP %s_duration_seconds How long the last ckpt %s took.\n# TYPE %s_duration_seconds gauge\n%s_duration_seconds %.3f\n", name, verb, name, name, now.Sub(start).Seconds())
	fmt.Fprintf(&b, "# HELP %s_bytes Bytes the last ckpt %s wrote or read.\n# TYPE %s_bytes gauge\n%s_bytes %d\n", name, verb, name, name, bytes)
	fmt.Fprintf(&b, "# HELP %s_iteration Iteration of the last ckpt %s.\n# TYPE %s_iteration gauge\n%s_iteration %d\n", name, verb, name, name, iter)
	f, err := cli.CreateAtomic(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.WriteString(b.String()); err != nil {
		return err
	}
	return f.Commit()
}

// bar is a progress bar on stderr, drawn only on a terminal (or always).
type bar struct {
	w     io.Writer
	on    bool
	label string
	total int64
	start time.Time
	last  time.Time
	n     int64
}

func newBar(w io.Writer, mode, label string) *bar {
	on := mode == "always"
	if mode == "auto" {
		if f, ok := w.(*os.File); ok {
			_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
			on = err == nil
		}
	}
	return &bar{w: w, on: on, label: label, start: time.Now()}
}

func (b *bar) set(n int64) {
	b.n = n
	if !b.on || time.Since(b.last) < 100*time.Millisecond {
		return
	}
	b.last = time.Now()
	b.draw()
}

func (b *bar) draw() {
	rate := float64(b.n) / 1e6 / max(time.Since(b.start).Seconds(), 1e-9)
	if b.total > 0 {
		frac := min(float64(b.n)/float64(b.total), 1)
		k := int(frac * 30)
		fmt.Fprintf(b.w, "\r%s [%s%s] %5.1f%% %d/%d bytes %.1f MB/s ", b.label, strings.Repeat("=", k), strings.Repeat(" ", 30-k), 100*frac, b.n, b.total, rate)
		return
	}
	fmt.Fprintf(b.w, "\r%s %d bytes %.1f MB/s ", b.label, b.n, rate)
}

func (b *bar) done() {
	if b.on {
		b.draw()
		fmt.Fprintln(b.w)
	}
}
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
