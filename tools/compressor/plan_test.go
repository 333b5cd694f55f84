package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/costmodel"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/espresso"
)

var update = flag.Bool("update", false, "rewrite testdata/plan/bert-base.json")

const planDir = "testdata/plan"

// bertGrads lists BERT-base's gradients (BertForPreTraining, hidden 768,
// 12 layers, FFN 3072, vocabulary 30522, 512 positions, 2 token types; the
// MLM decoder's weight is tied to the word embeddings) in backprop-ready
// order: the heads first, then layers 11 to 0, then the embeddings. Times
// are a model, not a measurement: a V100-class GPU at 25 TFLOP/s on 1024
// tokens per GPU (the paper's batch), backward = 4·tokens·params FLOPs for
// a matmul, 15 µs for an element-wise kernel, the attention core charged
// to the query weight.
func bertGrads() (grads []map[string]any, forwardNS int64) {
	const tokens, flops, elem = 1024.0, 25e12, 15e3
	var ready float64
	add := func(name string, numel int64, ns float64) {
		ready += ns
		grads = append(grads, map[string]any{"name": name, "numel": numel, "bytes": 4 * numel, "dtype": "f32",
			"ready_ns": int64(ready), "compute_ns": int64(ns)})
	}
	mm := func(rows, cols int64) float64 { return 4 * tokens * float64(rows*cols) / flops * 1e9 }
	lin := func(prefix string, out, in int64, extra float64) {
		add(prefix+".bias", out, elem)
		add(prefix+".weight", out*in, mm(out, in)+extra)
	}
	ln := func(prefix string) {
		add(prefix+".bias", 768, elem)
		add(prefix+".weight", 768, elem)
	}
	// MLM head (the decoder runs on the 15% masked tokens) and NSP head
	add("cls.predictions.bias", 30522, mm(30522, 768)*0.15)
	ln("cls.predictions.transform.LayerNorm")
	lin("cls.predictions.transform.dense", 768, 768, 0)
	lin("cls.seq_relationship", 2, 768, 0)
	lin("bert.pooler.dense", 768, 768, 0)
	attention := 4 * tokens * 512 * 768 * 2 / flops * 1e9
	for l := 11; l >= 0; l-- {
		p := fmt.Sprintf("bert.encoder.layer.%d.", l)
		ln(p + "output.LayerNorm")
		lin(p+"output.dense", 768, 3072, 0)
		lin(p+"intermediate.dense", 3072, 768, 0)
		ln(p + "attention.output.LayerNorm")
		lin(p+"attention.output.dense", 768, 768, 0)
		lin(p+"attention.self.value", 768, 768, 0)
		lin(p+"attention.self.key", 768, 768, 0)
		lin(p+"attention.self.query", 768, 768, attention)
	}
	ln("bert.embeddings.LayerNorm")
	add("bert.embeddings.token_type_embeddings.weight", 2*768, elem)
	add("bert.embeddings.position_embeddings.weight", 512*768, 2*elem)
	add("bert.embeddings.word_embeddings.weight", 30522*768, mm(30522, 768)*0.15+100e3)
	return grads, int64(ready / 2)
}

// The BERT-base fixture is regenerated with -update; it must match.
func TestBertFixture(t *testing.T) {
	grads, fwd := bertGrads()
	want := map[string]any{"name": "bert-base (BertForPreTraining; sizes exact, times modelled)", "forward_ns": fwd, "grads": grads}
	b, err := json.MarshalIndent(want, "", " ")
	require.NoError(t, err)
	path := filepath.Join(planDir, "bert-base.json")
	if *update {
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	}
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.JSONEq(t, string(b), string(got), "run go test -run TestBertFixture -update")
	var total int64
	for _, g := range grads {
		total += g["numel"].(int64)
	}
	assert.Len(t, grads, 206)
	// BERT-base: 110M parameters (+ the MLM head's transform and bias)
	assert.Equal(t, int64(110106428), total)
}

func runPlan(t *testing.T, args ...string) (int, []byte, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"plan"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.Bytes(), errb.String()
}

var bertArgs = []string{"--model", filepath.Join(planDir, "bert-base.json"), "--cluster", filepath.Join(planDir, "nvlink-8x8-100g.json"),
	"--gpu-encode", "60:150", "--gpu-decode", "25:300", "--samples", filepath.Join(planDir, "bench-cpu.tw")}

func TestPlanBERTFrames(t *testing.T) {
	code, out, stderr := runPlan(t, append([]string{"--algo", "topk", "--format", "frames"}, bertArgs...)...)
	require.Equal(t, 0, code, stderr)
	r := wire.NewReader(bytes.NewReader(out), wire.DefaultLimits)
	var plans []*wire.Plan
	var stats *wire.Stats
	for {
		f, err := r.Next()
		if err != nil {
			break
		}
		switch f := f.(type) {
		case *wire.Plan:
			plans = append(plans, f)
		case *wire.Stats:
			stats = f
		}
	}
	require.Len(t, plans, 206, "one strategy frame per gradient")
	require.NotNil(t, stats)
	for i, p := range plans {
		assert.Equal(t, "compression", p.Kind)
		assert.Equal(t, [][2]int64{{int64(i), int64(i)}}, p.Groups)
		it := p.Items[0]
		assert.GreaterOrEqual(t, it["start_ns"].(int64), it["ready_ns"].(int64), "gradient %d", i)
		assert.NotEmpty(t, it["option"])
	}
	v := stats.Values
	for _, b := range []string{"none", "all", "threshold"} {
		assert.LessOrEqual(t, v["predicted_ns"], v[b+"_ns"], b)
	}
	assert.Less(t, v["predicted_ns"], v["none_ns"], "compression pays on 8x8 at 100 Gbit/s")
	assert.Greater(t, v["compressed"], 0.0)
	t.Logf("BERT-base topk 8x8 NVLink: plan %.2f ms, none %.2f, all %.2f, threshold %.2f; %v compressed, %v offloaded; %.1f ms selection",
		v["predicted_ns"]/1e6, v["none_ns"]/1e6, v["all_ns"]/1e6, v["threshold_ns"]/1e6, v["compressed"], v["offloaded"], v["selection_ms"])
}

func TestPlanExplainAndTable(t *testing.T) {
	code, out, stderr := runPlan(t, append([]string{"--algo", "efsignsgd", "--format", "table", "--explain"}, bertArgs...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, string(out), "predicted iteration")
	assert.Contains(t, string(out), "bert.embeddings.word_embeddings.weight")
	assert.Contains(t, stderr, "explain:")
	assert.Contains(t, stderr, "#205 bert.embeddings.word_embeddings.weight")
	assert.Regexp(t, `visit \d+: `, stderr)
	code, out, stderr = runPlan(t, append([]string{"--algo", "randomk", "--format", "json", "--no-cpu"}, bertArgs...)...)
	require.Equal(t, 0, code, stderr)
	var j map[string]any
	require.NoError(t, json.Unmarshal(out, &j))
	assert.Len(t, j["grads"], 206)
	assert.EqualValues(t, 0, j["summary"].(map[string]any)["offloaded"])
}

// Inconsistent inputs give clear errors with the documented exit codes.
func TestPlanErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(s), 0o644))
		return p
	}
	model := write("m.json", `{"name":"m","grads":[{"name":"a","numel":1000,"ready_ns":100},{"name":"b","numel":5000000,"ready_ns":900}]}`)
	outOfOrder := write("bad.json", `{"name":"m","grads":[{"name":"a","numel":1000,"ready_ns":900},{"name":"b","numel":5000000,"ready_ns":100}]}`)
	cl := filepath.Join(planDir, "nvlink-8x8-100g.json")
	costs := []string{"--gpu-encode", "60:150", "--gpu-decode", "25:300"}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--algo", "zstd", "--model", model, "--cluster", cl}, cli.ExitUsage, `unknown algorithm "zstd"`},
		{[]string{"--algo", "threshold", "--model", model, "--cluster", cl}, cli.ExitUsage, "depends on the data"},
		{[]string{"--algo", "topk", "--model", model, "--cluster", filepath.Join(planDir, "no-inter.json")}, cli.ExitBadInput, "inter_gbit_s (the inter-machine bandwidth) is missing"},
		{[]string{"--algo", "topk", "--model", model, "--cluster", write("typo.json", `{"nodes":2,"gpus_per_node":1,"inter_gbps":100}`)}, cli.ExitBadInput, `unknown field "inter_gbps"`},
		{[]string{"--algo", "topk", "--model", model, "--cluster", write("zero.json", `{"nodes":2,"gpus_per_node":1,"inter_gbit_s":0}`)}, cli.ExitBadInput, "inter-machine bandwidth is missing or not positive"},
		{[]string{"--algo", "topk", "--model", outOfOrder, "--cluster", cl}, cli.ExitBadInput, "gradients out of order: gradient 1 (b) is ready at 100 ns, before gradient 0 (a)"},
		{[]string{"--algo", "topk", "--model", model, "--cluster", cl, "--samples", filepath.Join(planDir, "bench-cpu.tw"), "--algo", "natural"}, cli.ExitBadInput, `no compressor.bench frame for codec "natural"`},
		{[]string{"--algo", "topk", "--model", model, "--cluster", cl, "--gpu-encode", "60"}, cli.ExitUsage, "--gpu-encode and --gpu-decode go together"},
		{[]string{"--algo", "topk", "--model", model, "--cluster", cl, "--gpu-encode", "x:1", "--gpu-decode", "1:1"}, cli.ExitUsage, "ALPHA_US:GBPS"},
		{[]string{"--algo", "topk", "--model", model, "--cluster", cl}, cli.ExitUsage, "no compression times for topk"},
		{[]string{"--algo", "topk", "--model", write("empty.json", `{"name":"e","grads":[]}`), "--cluster", cl}, cli.ExitBadInput, "has no gradients"},
		{[]string{"--algo", "topk", "--model", model, "--cluster", cl, "--restrict", "I1:RS > C > X:AG* > D > I2:AG"}, cli.ExitUsage, "keep at least one uncompressed path"},
		{[]string{"--algo", "topk", "--model", write("notastream", "garbage"), "--cluster", cl}, cli.ExitBadInput, ""},
	} {
		args := c.args
		if !strings.Contains(c.msg, "go together") && !strings.Contains(c.msg, "ALPHA") && !strings.Contains(c.msg, "no compression times") && !strings.Contains(c.msg, "natural") {
			args = append(args, costs...)
		}
		code, _, stderr := runPlan(t, args...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, stderr)
		assert.Contains(t, stderr, c.msg, "%v", c.args)
	}
	// a model stream with the model frame works like the JSON form
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	require.NoError(t, w.Write(&wire.Model{Name: "m", Grads: []wire.Grad{{Name: "a", Bytes: 4000, ReadyNS: 100}, {Name: "b", Bytes: 20000000, ReadyNS: 900}}}))
	require.NoError(t, w.Close())
	var out, errb bytes.Buffer
	code := run(append([]string{"plan", "--algo", "topk", "--cluster", cl, "--format", "json"}, costs...), &b, &out, &errb)
	require.Equal(t, 0, code, errb.String())
	assert.Contains(t, out.String(), `"numel": 5000000`)
}

// BenchmarkPlanBERT times plan selection (baselines, Algorithms 1 and 2)
// for BERT-base's 206 gradients over the whole tree (4341 options).
func BenchmarkPlanBERT(b *testing.B) {
	for _, cfg := range []struct{ cluster, algo string }{{"nvlink-8x8-100g", "topk"}, {"nvlink-8x8-100g", "efsignsgd"}, {"pcie-8x8-25g", "topk"}} {
		b.Run(cfg.cluster+"/"+cfg.algo, func(b *testing.B) {
			c := &PlanCmd{Algo: cfg.algo, Model: filepath.Join(planDir, "bert-base.json"), Cluster: filepath.Join(planDir, cfg.cluster+".json"),
				GPUEncode: "60:150", GPUDecode: "25:300", Samples: []string{filepath.Join(planDir, "bench-cpu.tw")},
				ThresholdElems: 16384, OffloadCap: 1000000}
			c.CodecFlags.Ratio = 0.01
			c.WireFlags.MaxPayload, c.WireFlags.MaxElems = 1<<32-1, 1<<20
			rio := &cli.IO{Stdin: strings.NewReader("")}
			in, _, err := c.instance(rio)
			if err != nil {
				b.Fatal(err)
			}
			var last float64
			var res *espresso.Result
			c0 := cpuTime()
			for b.Loop() {
				// a fresh instance: no cached option prices
				fresh, err := espresso.NewInstance(in.Job, in.Cluster, in.Costs, in.Tree)
				if err != nil {
					b.Fatal(err)
				}
				if res, err = fresh.Plan(espressoOptions(c)); err != nil {
					b.Fatal(err)
				}
				last = res.F
			}
			b.Logf("%d evaluations, offloading: %d candidates, %d groups, %d points (exhaustive %v)", res.Evaluations,
				res.OffloadCandidates, res.OffloadGroups, res.OffloadPoints, res.OffloadExhaustive)
			b.ReportMetric(last/1e6, "iter_ms")
			// the process's CPU time: on a shared machine the wall time
			// measures the neighbours too
			b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
}

// FuzzCluster: the cluster parser never panics, and what it accepts is a
// valid cluster whose collectives have finite, non-negative times.
func FuzzCluster(f *testing.F) {
	for _, name := range []string{"nvlink-8x8-100g.json", "pcie-8x8-25g.json", "no-inter.json"} {
		b, err := os.ReadFile(filepath.Join(planDir, name))
		require.NoError(f, err)
		f.Add(b)
	}
	f.Add([]byte(`{"nodes":2,"gpus_per_node":1,"inter_gbit_s":1e-300}`))
	f.Add([]byte(`{"nodes":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cl, err := parseCluster("fuzz", b)
		if err != nil {
			return
		}
		require.NoError(t, cl.Validate(false))
		for _, g := range []costmodel.Group{cl.Flat(), cl.IntraGroup(), cl.InterGroup(cl.GPUsPerNode)} {
			x := cl.Time(costmodel.Alltoall, g, 1e6)
			require.False(t, math.IsNaN(x) || x < 0, "time %g", x)
		}
	})
}

// cpuTime is the process's user and system time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// --max-comp-ops and --restrict bound the options every gradient gets.
func TestPlanConstraints(t *testing.T) {
	code, out, stderr := runPlan(t, append([]string{"--algo", "topk", "--format", "json", "--max-comp-ops", "1"}, bertArgs...)...)
	require.Equal(t, 0, code, stderr)
	var j struct {
		Grads []struct {
			Comps  int    `json:"comps"`
			Path   string `json:"path"`
			Option string `json:"option"`
		} `json:"grads"`
	}
	require.NoError(t, json.Unmarshal(out, &j))
	require.Len(t, j.Grads, 206)
	for _, g := range j.Grads {
		assert.LessOrEqual(t, g.Comps, 1, g.Option)
	}
	allowed := []string{"F:AR", "I1:RS > X:AR > I2:AG", "I1:RS > C > X:AG* > D > I2:AG"}
	code, out, stderr = runPlan(t, append([]string{"--algo", "efsignsgd", "--format", "json", "--restrict", strings.Join(allowed, ";")}, bertArgs...)...)
	require.Equal(t, 0, code, stderr)
	require.NoError(t, json.Unmarshal(out, &j))
	compressed := 0
	for _, g := range j.Grads {
		assert.Contains(t, allowed, g.Path)
		if g.Comps > 0 {
			compressed++
		}
	}
	assert.Positive(t, compressed)
}

// The built binary reads the model from stdin and writes a stream that
// dump reads back: the plan as another tool would consume it.
func TestPlanBinary(t *testing.T) {
	bin := clitest.Binary(t, "compressor")
	var model bytes.Buffer
	w := wire.NewWriter(&model, "test")
	require.NoError(t, w.Write(&wire.Model{Name: "m", ForwardNS: 1e6, Grads: []wire.Grad{
		{Name: "a", Numel: 1 << 20, ReadyNS: 1e6}, {Name: "b", Numel: 8 << 20, ReadyNS: 3e6}, {Name: "c", Numel: 1000, ReadyNS: 4e6}}}))
	require.NoError(t, w.Close())
	cmd := exec.Command(bin, "plan", "--algo", "randomk", "--cluster", filepath.Join(planDir, "pcie-8x8-25g.json"),
		"--gpu-encode", "60:150", "--gpu-decode", "25:300", "--cpu-encode", "10:2", "--cpu-decode", "5:4")
	cmd.Stdin = &model
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	require.NoError(t, cmd.Run(), errb.String())
	dump := exec.Command(bin, "dump")
	dump.Stdin = &out
	lines, err := dump.Output()
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(lines), `"t":"plan"`))
	assert.Contains(t, string(lines), `"name":"compressor.plan"`)
}

// --cpu-job: ranks that train on CPUs. This machine's compressor bench
// (no device label) prices the training device's codec, nothing is
// offloaded, and a cluster without pcie_* keys is accepted: the large
// gradient is compressed, the small ones not. Without CPU times it is a
// usage error.
func TestPlanCPUJob(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m.json")
	require.NoError(t, os.WriteFile(model, []byte(`{"name":"m","grads":[{"name":"small","numel":1000,"ready_ns":100000},{"name":"emb","numel":3200000,"ready_ns":200000000}]}`), 0o644))
	cl := filepath.Join(dir, "cpu4.json")
	require.NoError(t, os.WriteFile(cl, []byte(`{"nodes":4,"gpus_per_node":1,"inter_gbit_s":1,"inter_alpha_us":50}`), 0o644))
	args := []string{"--algo", "topk", "--model", model, "--cluster", cl, "--format", "table"}
	code, _, stderr := runPlan(t, append(args, "--samples", filepath.Join(planDir, "bench-cpu.tw"))...)
	require.Equal(t, cli.ExitBadInput, code, "without --cpu-job a CPU codec needs PCIe: %s", stderr)
	code, out, stderr := runPlan(t, append(args, "--cpu-job", "--samples", filepath.Join(planDir, "bench-cpu.tw"))...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, string(out), "the CPU's (--cpu-job)")
	assert.Regexp(t, `1\s+emb\s+3200000.*C@gpu`, string(out))
	assert.Regexp(t, `0\s+small\s+1000.*F:AR`, string(out))
	code, _, stderr = runPlan(t, append(args, "--cpu-job", "--gpu-encode", "60:150", "--gpu-decode", "25:300")...)
	assert.Equal(t, cli.ExitUsage, code)
	assert.Contains(t, stderr, "--cpu-job: no CPU codec times")
}
