package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/tools/profiler/internal/analysis"
	"trainwire.dev/tools/profiler/internal/classify"
)

// ncclTrace rewrites the kineto-2024 fixture as a job whose collectives
// carry their size only in an nccl:all_to_all annotation's Input Dims
// (dims: nil for none at all), run by ncclDevKernel_SendRecv kernels that
// carry nothing, and writes it into dir.
func ncclTrace(t *testing.T, dir string, dims []int64) {
	t.Helper()
	for r := range 2 {
		name := filepath.Join("testdata/synth/kineto-2024", "rank"+string(rune('0'+r))+".pt.trace.json")
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(b, &doc))
		for _, e := range doc["traceEvents"].([]any) {
			ev := e.(map[string]any)
			args, _ := ev["args"].(map[string]any)
			switch n, _ := ev["name"].(string); {
			case n == "record_param_comms":
				ev["name"] = "nccl:all_to_all"
				for _, k := range []string{"Collective name", "In msg nelems", "Out msg nelems", "dtype"} {
					delete(args, k)
				}
				if dims != nil {
					args["Input Dims"] = []any{dims, dims}
				}
			case strings.HasPrefix(n, "ncclDevKernel_"):
				ev["name"] = "ncclDevKernel_SendRecv(ncclDevComm*, unsigned long, ncclWork*)"
				for _, k := range []string{"Collective name", "In msg nelems", "Out msg nelems", "dtype"} {
					delete(args, k)
				}
			}
		}
		out, err := json.Marshal(doc)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, filepath.Base(name)), out, 0o644))
	}
}

// A collective sized only by its nccl:* annotation's Input Dims gets those
// bytes, and the annotation's operation (all_to_all, not the kernel's
// SendRecv); one with no size anywhere says "unknown", not bytes 0 and
// bandwidth 0.000 (issue 24 item 8).
func TestCollectiveSizeFromInputDims(t *testing.T) {
	dir := t.TempDir()
	ncclTrace(t, dir, []int64{512, 64})
	code, _, stderr := runCLI(t, nil, "summary", "--format", "json", "--no-frames", dir)
	require.Equal(t, 0, code, stderr)
	var rep struct {
		Collectives struct {
			Ops []struct {
				Op    string  `json:"op"`
				Bytes int64   `json:"bytes"`
				BusBW float64 `json:"busbw_gbps"`
			} `json:"ops"`
		} `json:"collectives"`
	}
	require.NoError(t, json.Unmarshal([]byte(stderr[strings.Index(stderr, "{"):]), &rep), stderr)
	require.Len(t, rep.Collectives.Ops, 1, stderr)
	assert.Equal(t, "alltoall", rep.Collectives.Ops[0].Op)
	assert.Equal(t, int64(512*64*4), rep.Collectives.Ops[0].Bytes)
	assert.Positive(t, rep.Collectives.Ops[0].BusBW)

	bare := t.TempDir()
	ncclTrace(t, bare, nil)
	code, _, stderr = runCLI(t, nil, "summary", "--format", "table", "--no-frames", bare)
	require.Equal(t, 0, code, stderr)
	assert.Regexp(t, `(?m)^alltoall\s+unknown\s+\d+\s+[0-9.]+\s+-\s+-`, stderr)
}

// --scope hta analyses one step fewer, on whole µs; the default keeps them all.
func TestSummaryScopeHTA(t *testing.T) {
	iters := func(args ...string) (int, int64) {
		code, _, stderr := runCLI(t, nil, append([]string{"summary", "--format", "json", "--no-frames"}, args...)...)
		require.Equal(t, 0, code, stderr)
		var rep struct {
			Ranks []struct {
				Iterations struct {
					Count int `json:"count"`
				} `json:"iterations"`
				Temporal struct {
					SpanNS int64 `json:"span_ns"`
				} `json:"temporal"`
			} `json:"ranks"`
		}
		require.NoError(t, json.Unmarshal([]byte(stderr[strings.Index(stderr, "{"):]), &rep), stderr)
		return rep.Ranks[0].Iterations.Count, rep.Ranks[0].Temporal.SpanNS
	}
	all, _ := iters("testdata/synth/kineto-2024")
	hta, span := iters("--scope", "hta", "testdata/synth/kineto-2024")
	require.Equal(t, all-1, hta)
	require.Zero(t, span%1000, "span %d ns is not whole µs", span)
}

// Plot: step bars carry their ProfilerStep number; lanes come in the same
// order on every rank — by what they are busiest with, then by name — not
// by thread or stream id, which differ between ranks.
func TestPlotStepLabelsAndLaneOrder(t *testing.T) {
	assert.Equal(t, "#12", stepLabel("ProfilerStep#12", 0))
	assert.Equal(t, "#3", stepLabel("step", 3))
	names := []string{"stream 20", "stream 7", "thread 1"}
	spans := []*analysis.Span{
		{Lane: 0, Class: classify.Comm, TS: 0, End: 100},   // stream 20: nccl
		{Lane: 1, Class: classify.Compute, TS: 0, End: 90}, // stream 7: kernels
		{Lane: 2, Class: classify.Memory, TS: 0, End: 10},
	}
	lanes := []int{0, 1, 2}
	orderLanes(lanes, spans, names)
	assert.Equal(t, []int{1, 2, 0}, lanes)
}
