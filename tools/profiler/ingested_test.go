package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadsIngestOutput: summary, model and plot read the stream `profiler
// ingest` writes (issue 24 item 10: they failed with "json: expected a
// value, found byte 0x85"), and summary's report of the stream equals the
// report of the traces themselves, fixture by fixture (the legacy DDP
// sets' collective sizes included: they come from the rank-N.meta.json
// sidecars, which ingest carries in its stats frames). The timing model
// from the stream is the model from the traces.
func TestReadsIngestOutput(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx, func(t *testing.T) {
			dir := t.TempDir()
			traces := filepath.Join("testdata", fx)
			code, stream, errs := runCLI(t, nil, "ingest", traces)
			require.Equal(t, 0, code, errs)
			tw := filepath.Join(dir, "events.tw")
			require.NoError(t, os.WriteFile(tw, stream, 0o644))
			want := report(t, dir, traces)
			got := report(t, dir, tw)
			assert.Equal(t, want, got)
			wcode, wmodel, werrs := runCLI(t, nil, "model", traces)
			code, model, errs := runCLI(t, strings.NewReader(string(stream)), "model", "-")
			assert.Equal(t, wcode, code, "model of the traces: %s; of the stream on stdin: %s", werrs, errs)
			assert.Equal(t, wmodel, model, "the same model from the traces and from their stream")
			code, _, errs = runCLI(t, nil, "plot", "-o", filepath.Join(dir, "p.svg"), tw)
			assert.Equal(t, 0, code, "plot: %s", errs)
		})
	}
}

// report is summary's JSON report of input, its file names left out.
func report(t *testing.T, dir, input string) map[string]any {
	t.Helper()
	rep := filepath.Join(dir, "report.json")
	code, _, errs := runCLI(t, nil, "summary", "--format", "json", "--report", rep, "--instances", input)
	require.Equal(t, 0, code, "summary %s: %s", input, errs)
	b, err := os.ReadFile(rep)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	for _, r := range m["ranks"].([]any) {
		delete(r.(map[string]any), "files")
	}
	return m
}
