package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

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

// newBar is lib/cli's progress bar for --progress (auto: only on a
// terminal), counting bytes.
func newBar(w io.Writer, mode, label string) *cli.Progress {
	return cli.NewProgress(w, cli.ProgressOptions{Label: label, Bytes: true, Mode: mode})
}
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
