package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
)

// G1 of specs/seed-cupcake-gemini.md D.3 in ns and bytes: α_g 0.5 ms,
// β_g 0.25 ms/MB = 4 GB/s, α_h 1 ms, β_h 0.05 ms/MB = 20 GB/s.
var g1Costs = []string{"--comm-alpha-us", "500", "--comm-gbps", "4", "--comp-alpha-us", "1000", "--comp-gbps", "20"}

func runFuser(t *testing.T, stdin []byte, args ...string) (int, []byte, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, bytes.NewReader(stdin), &out, &errb)
	return code, out.Bytes(), errb.String()
}

func TestPlanFramesDeterministicAndEval(t *testing.T) {
	args := append([]string{"plan", "--model", "testdata/g1.json", "--format", "frames"}, g1Costs...)
	code, a, stderr := runFuser(t, nil, args...)
	require.Equal(t, 0, code, stderr)
	_, b, _ := runFuser(t, nil, args...)
	assert.Equal(t, a, b, "same input, different output bytes")

	r := wire.NewReader(bytes.NewReader(a), wire.Limits{})
	f, err := r.Next()
	require.NoError(t, err)
	plan := f.(*wire.Plan)
	assert.Equal(t, "fusion", plan.Kind)
	assert.Equal(t, [][2]int64{{0, 3}, {4, 4}}, plan.Groups)
	assert.Equal(t, int64(18_400_000), plan.PredictedNS)

	path := filepath.Join(t.TempDir(), "plan.tw")
	require.NoError(t, os.WriteFile(path, a, 0o644))
	code, out, stderr := runFuser(t, nil, append([]string{"eval", "--model", "testdata/g1.json", "--plan", path, "--format", "json"}, g1Costs...)...)
	require.Equal(t, 0, code, stderr)
	var rep jsonReport
	require.NoError(t, json.Unmarshal(out, &rep))
	assert.InDelta(t, 18.40, rep.IterMS, 1e-9)

	code, out, stderr = runFuser(t, nil, append([]string{"eval", "--model", "testdata/g1.json", "--groups", "0,1,2,3,4", "--format", "json"}, g1Costs...)...)
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal(out, &rep))
	assert.InDelta(t, 20.75, rep.IterMS, 1e-9, "layer-wise")
}

func TestPlanFromModelStream(t *testing.T) {
	var in bytes.Buffer
	w := wire.NewWriter(&in, "test")
	require.NoError(t, w.Write(&wire.Model{Name: "s", ForwardNS: 5e6, Grads: []wire.Grad{
		{Name: "a", Bytes: 4e6, ComputeNS: 2e6}, {Name: "b", Bytes: 5e5, ComputeNS: 1e6}}}))
	require.NoError(t, w.Close())
	code, out, stderr := runFuser(t, in.Bytes(), append([]string{"plan", "--format", "json"}, g1Costs...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, string(out), `"model": "s"`)
}

func TestTruncatedModelStream(t *testing.T) {
	var in bytes.Buffer
	w := wire.NewWriter(&in, "test")
	require.NoError(t, w.Write(&wire.Model{Name: "s", Grads: []wire.Grad{{Name: "a", Bytes: 4, ComputeNS: 1}}}))
	require.NoError(t, w.Close())
	code, out, stderr := runFuser(t, in.Bytes()[:in.Len()-4], append([]string{"plan", "--format", "json"}, g1Costs...)...)
	assert.Equal(t, cli.ExitBadInput, code)
	assert.Contains(t, stderr, "truncated")
	assert.Empty(t, out)
}

// Compression samples flat below 4 MB, then linear (what GPU codecs do):
// the fit is piecewise, so auto's exact search runs and alg51 forced onto
// it is flagged as not proven.
func TestPiecewiseSamples(t *testing.T) {
	var s bytes.Buffer
	w := wire.NewWriter(&s, "compressor/test")
	for x := 1e5; x < 6.4e7; x *= 1.6 {
		ns := 400e3 + 0.02*max(0, x-4e6)
		require.NoError(t, w.Write(&wire.Stats{Tool: "compressor", Name: "bench", Rank: -1,
			Values: map[string]float64{"bytes": x, "encode_ns": ns * 0.6, "decode_ns": ns * 0.4}}))
	}
	require.NoError(t, w.Close())
	path := filepath.Join(t.TempDir(), "samples.tw")
	require.NoError(t, os.WriteFile(path, s.Bytes(), 0o644))
	base := []string{"plan", "--model", "testdata/g1.json", "--comm-alpha-us", "500", "--comm-gbps", "4", "--comp-samples", path, "--format", "json"}
	code, out, stderr := runFuser(t, nil, base...)
	require.Equal(t, 0, code, stderr)
	var rep jsonReport
	require.NoError(t, json.Unmarshal(out, &rep))
	assert.Equal(t, "pareto", rep.Algo)
	assert.True(t, rep.ProvenOptimal)
	assert.True(t, strings.HasPrefix(rep.Costs["comp"], "fitted from"), rep.Costs["comp"])
	assert.Contains(t, rep.Costs["comp"], "piecewise")

	code, out, stderr = runFuser(t, nil, append(base, "--algo", "alg51")...)
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal(out, &rep))
	assert.False(t, rep.ProvenOptimal)
	assert.Contains(t, stderr, "not proven optimal")
}

// compressor bench's own output (bytes_in, encode_ns_mean, decode_ns_mean,
// one frame per algo and size, memcpy among them) is what --comp-samples
// reads: with several algos in it, --comp-algo says which.
func TestCompressorBenchSamples(t *testing.T) {
	bench := filepath.Join(t.TempDir(), "bench.tw")
	cmd := exec.Command(clitest.Binary(t, "compressor"), "bench", "--algos", "fp16,topk", "--sizes", "64KiB,256KiB,1MiB", "--iters", "1", "--warmup", "0")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	require.NoError(t, err, "%s", errb.String())
	require.NoError(t, os.WriteFile(bench, out, 0o644))
	args := append([]string{"plan", "--model", "testdata/g1.json", "--format", "json", "--comp-samples", bench}, g1Costs[:4]...)
	code, _, stderr := runFuser(t, nil, args...)
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "3 algos (fp16, memcpy, topk)")
	assert.Contains(t, stderr, "--comp-algo")
	code, out, stderr = runFuser(t, nil, append(args, "--comp-algo", "fp16", "--format", "table")...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, string(out), "fitted from 3 samples")
	code, _, stderr = runFuser(t, nil, append(args, "--comp-algo", "dgc")...)
	assert.Equal(t, cli.ExitBadInput, code)
	assert.Contains(t, stderr, "algo=dgc")
}
