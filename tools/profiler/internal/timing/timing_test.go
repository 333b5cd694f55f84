package timing

import (
	"bytes"
	"path/filepath"
	"testing"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/profiler/internal/analysis"
	"trainwire.dev/tools/profiler/internal/classify"
	"trainwire.dev/tools/profiler/internal/trace"
)

func load(t *testing.T, dir string) []*analysis.Rank {
	t.Helper()
	c, _ := classify.New(nil, false)
	files, err := trace.Expand([]string{filepath.Join("..", "..", "testdata", dir)})
	if err != nil {
		t.Fatal(err)
	}
	ranks, err := analysis.Load(files, analysis.LoadOptions{Classifier: c, Rank: -1})
	if err != nil {
		t.Fatal(err)
	}
	return ranks
}

// TestKinetoModel: backward starts at the first AccumulateGrad (200 µs into
// each step), which end at 210, 230, 260 and 400 µs: ready 10, 30, 60, 200 µs;
// sizes from Input Dims; forward is "## forward ##" (195 µs); the comm
// samples are the NCCL kernels (400 µs on rank 0, 350 on rank 1).
func TestKinetoModel(t *testing.T) {
	m, err := FromTraces(load(t, "synth/kineto-2024"), Options{Rank: -1})
	if err != nil {
		t.Fatal(err)
	}
	if m.World != 2 || m.Iters != 4 || m.IterNS != 900_000 || m.ForwardNS != 195_000 || m.BackwardNS != 200_000 {
		t.Fatalf("model %+v", m)
	}
	want := []struct{ ready, compute, numel int64 }{{10_000, 10_000, 10}, {30_000, 20_000, 2560}, {60_000, 30_000, 256}, {200_000, 140_000, 262144}}
	if len(m.Grads) != len(want) {
		t.Fatalf("grads %+v", m.Grads)
	}
	for i, w := range want {
		g := m.Grads[i]
		if g.ReadyNS != w.ready || g.ComputeNS != w.compute || g.Numel != w.numel || g.Bytes != 4*w.numel {
			t.Errorf("grad %d: %+v, want %+v", i, g, w)
		}
	}
	if len(m.Comm) != 4 {
		t.Fatalf("comm %+v", m.Comm)
	}
	for _, c := range m.Comm {
		if c.Bytes != 1059880 || (c.NS != 400_000 && c.NS != 350_000) || c.Op != "allreduce" {
			t.Errorf("comm sample %+v", c)
		}
	}
	if m.Meta["iter_spread"] != 0.0 || m.Meta["ready_spread"] != 0.0 {
		t.Errorf("spread %v %v", m.Meta["iter_spread"], m.Meta["ready_spread"])
	}
	// one rank only
	m0, err := FromTraces(load(t, "synth/kineto-2024"), Options{Rank: 1})
	if err != nil || m0.Iters != 2 || len(m0.Comm) != 2 || m0.Comm[0].NS != 350_000 {
		t.Fatalf("rank 1: %+v %v", m0, err)
	}
}

// TestGlooModel: real traces, sizes and names from the sidecar; backprop
// order is the reverse of registration; the α-β line is fitted.
func TestGlooModel(t *testing.T) {
	m, err := FromTraces(load(t, "ddp-gloo-2"), Options{Rank: -1, Name: "net"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"fc2.bias", "fc2.weight", "fc1.bias", "fc1.weight", "conv2.bias", "conv2.weight", "conv1.bias", "conv1.weight"}
	numel := []int64{10, 2560, 256, 524288, 32, 4608, 16, 432}
	if len(m.Grads) != len(names) || m.Iters != 6 || m.World != 2 {
		t.Fatalf("model %+v", m)
	}
	prev := int64(0)
	for i, g := range m.Grads {
		if g.Name != names[i] || g.Numel != numel[i] || g.Bytes != 4*numel[i] {
			t.Errorf("grad %d: %+v", i, g)
		}
		if g.ReadyNS < prev || g.ComputeNS < 0 {
			t.Errorf("grad %d: ready %d after %d", i, g.ReadyNS, prev)
		}
		prev = g.ReadyNS
	}
	if len(m.Comm) != 12 || m.Comm[0].Bytes != 2108456 || m.Comm[1].Bytes != 20352 {
		t.Fatalf("comm %+v", m.Comm)
	}
	if _, ok := m.Meta["comm_beta_ns_per_byte"]; !ok {
		t.Errorf("no α-β fit: %v", m.Meta)
	}
	if _, err := FromTraces(load(t, "ddp-gloo-2"), Options{Rank: -1, Params: []analysis.MetaParam{{Name: "x", Numel: 1}}}); err == nil {
		t.Error("a parameter list of the wrong length was accepted")
	}
}

func TestHorovodModel(t *testing.T) {
	m, err := FromTraces(load(t, "synth/horovod-legacy"), Options{Rank: -1})
	if err != nil {
		t.Fatal(err)
	}
	// fc1.weight negotiates first (t), fc2.weight 500 µs later
	if len(m.Grads) != 2 || m.Grads[0].Numel != 262144 || m.Grads[1].ReadyNS != 500_000 || m.Iters != 2 {
		t.Fatalf("model %+v", m)
	}
	if len(m.Comm) != 4 || m.Comm[0].NS != 300_000 || m.Comm[0].Bytes != 1048576 {
		t.Fatalf("comm %+v", m.Comm)
	}
}

func TestBytePSModel(t *testing.T) {
	m, err := FromTraces(load(t, "synth/byteps"), Options{Rank: -1})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Grads) != 2 || m.Grads[1].ReadyNS != 1_000_000 || m.Grads[0].Name != "gradient_0" || m.Iters != 2 {
		t.Fatalf("model %+v", m)
	}
}

// TestBuiltin: ResNet-50's gradients in backprop order with their real
// sizes, and a frame that encodes and decodes.
func TestBuiltin(t *testing.T) {
	m, err := FromBuiltin("resnet50", BuiltinOptions{Batch: 32, TFLOPS: 100, World: 8})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Grads) != 161 || m.Grads[0].Name != "fc.bias" || m.Grads[1].Name != "fc.weight" || m.Grads[1].Numel != 2048000 ||
		m.Grads[len(m.Grads)-1].Name != "conv1.weight" {
		t.Fatalf("grads: %d, first %+v, last %+v", len(m.Grads), m.Grads[0], m.Grads[len(m.Grads)-1])
	}
	var total int64
	for i, g := range m.Grads {
		total += g.Numel
		if i > 0 && g.ReadyNS < m.Grads[i-1].ReadyNS {
			t.Fatal("ready times go backwards")
		}
	}
	if total != 25_557_032 || m.Grads[len(m.Grads)-1].ReadyNS != m.BackwardNS {
		t.Fatalf("total %d, backward %d", total, m.BackwardNS)
	}
	// forward ≈ 8.2 GFLOPs · 32 / 100 TFLOP/s ≈ 2.6 ms; backward twice that
	if m.ForwardNS < 2_400_000 || m.ForwardNS > 2_800_000 || m.BackwardNS < 2*m.ForwardNS-50_000 || m.BackwardNS > 2*m.ForwardNS+50_000 {
		t.Fatalf("forward %d backward %d", m.ForwardNS, m.BackwardNS)
	}
	var buf bytes.Buffer
	w := wire.NewWriter(&buf, "test")
	if err := w.Write(m); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := wire.NewReader(&buf, wire.Limits{})
	f, err := r.Next()
	if err != nil {
		t.Fatal(err)
	}
	if got := f.(*wire.Model); len(got.Grads) != 161 || got.Grads[1].Bytes != 4*2048000 {
		t.Fatalf("decoded %+v", got.Grads[:2])
	}
	if _, err := FromBuiltin("vgg16", BuiltinOptions{Batch: 0, TFLOPS: 1}); err == nil {
		t.Error("batch 0 accepted")
	}
}
