package codec

import (
	"bytes"
	"math"
	"reflect"
	"testing"

	"trainwire.dev/lib/wire"
)

// TestLRRescale: at a constant learning rate the rescaled memory writes
// the frames and residuals of the plain one; when the rate changes, the
// residual enters as f32(lr')/f32(lr)·e; the rate travels in slot "lr".
func TestLRRescale(t *testing.T) {
	c := mustNew(t, "topk", Options{Ratio: 0.1})
	plain, _ := NewMemory("residual", MemoryOptions{})
	ea := &Encoder{Codec: c, Memory: plain}
	lrs := []float64{0.1, 0.1, 0.05, 0.2}
	var eb *Encoder
	for step, lr := range lrs {
		m, err := NewMemory("residual", MemoryOptions{RescaleLR: lr})
		if err != nil {
			t.Fatal(err)
		}
		if eb == nil {
			eb = &Encoder{Codec: c, Memory: m, Store: NewStore()}
		}
		eb.Memory = m // the rate of this step
		g := gauss(500, uint64(step+70))
		var want []float32
		if st := eb.Store.Get("w"); step > 0 {
			e, prev := st.Slots["e"], st.Slots["lr"]
			if len(prev) != 1 || prev[0] != float32(lrs[step-1]) {
				t.Fatalf("step %d: slot lr = %v", step, prev)
			}
			f := prev[0] / float32(lr)
			want = make([]float32, len(g))
			for i := range g {
				want[i] = f*e[i] + g[i]
			}
		}
		fb, sent, err := eb.Encode(Input{Name: "w", Step: int64(step), Data: g})
		if err != nil {
			t.Fatal(err)
		}
		if want != nil {
			e := eb.Store.Get("w").Slots["e"]
			for i := range want {
				if e[i] != want[i]-sent[i] {
					t.Fatalf("step %d: residual[%d] = %v, want %v", step, i, e[i], want[i]-sent[i])
				}
			}
		}
		fa, _, err := ea.Encode(Input{Name: "w", Step: int64(step), Data: g})
		if err != nil {
			t.Fatal(err)
		}
		same := reflect.DeepEqual(fa.Parts, fb.Parts)
		if step < 2 && !same {
			t.Fatalf("step %d: constant rate, frames differ from the plain memory", step)
		}
		if step == 2 && same {
			t.Fatalf("step %d: the rate changed and the frames did not", step)
		}
	}
	for _, bad := range []struct {
		mem string
		lr  float64
	}{{"dgc", 0.1}, {"none", 0.1}, {"residual", -1}, {"residual", math.Inf(1)}, {"residual", math.NaN()}} {
		if _, err := NewMemory(bad.mem, MemoryOptions{RescaleLR: bad.lr}); err == nil {
			t.Errorf("memory %s with rate %v accepted", bad.mem, bad.lr)
		}
	}
}

// TestPointResiduals: one store, two compression points of one tensor:
// each point keeps its own residual, as if it had an encoder of its own,
// and the state stream names them TENSOR#POINT@SLOT.
func TestPointResiduals(t *testing.T) {
	c := mustNew(t, "topk", Options{Ratio: 0.05})
	mem, _ := NewMemory("residual", MemoryOptions{})
	store := NewStore()
	rs := &Encoder{Codec: c, Memory: mem, Store: store, Point: "rs"}
	ag := &Encoder{Codec: c, Memory: mem, Store: store, Point: "ag"}
	alone := map[string]*Encoder{"rs": {Codec: c, Memory: mem}, "ag": {Codec: c, Memory: mem}}
	for step := range 3 {
		for _, p := range []struct {
			name string
			enc  *Encoder
			seed uint64
		}{{"rs", rs, 1}, {"ag", ag, 2}} {
			g := gauss(300, uint64(10*step)+p.seed)
			f, _, err := p.enc.Encode(Input{Name: "w", Step: int64(step), Data: g})
			if err != nil {
				t.Fatal(err)
			}
			want, _, err := alone[p.name].Encode(Input{Name: "w", Step: int64(step), Data: g})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.Parts, want.Parts) {
				t.Fatalf("step %d point %s: frames differ from an encoder of its own", step, p.name)
			}
		}
	}
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	if err := store.WriteTo(w); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	back, err := ReadStore(wire.NewReader(&b, wire.DefaultLimits))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"w#rs", "w#ag"} {
		if got, want := back.Get(key).Slots["e"], store.Get(key).Slots["e"]; !reflect.DeepEqual(got, want) || len(got) != 300 {
			t.Fatalf("state %s did not round-trip", key)
		}
	}
}

// TestDGCWarmup: k follows 25%, 6.25%, 1.5625%, 0.390625% of d for W
// steps each, then the codec's ratio; frames of every step decode, and
// a frame whose k does not match its step is rejected.
func TestDGCWarmup(t *testing.T) {
	const d, w = 20000, 2
	c := mustNew(t, "dgc", Options{Ratio: 0.001, DGCWarmup: w})
	if c.Params()["warmup"] != int64(w) {
		t.Fatalf("params %v", c.Params())
	}
	if _, ok := mustNew(t, "dgc", Options{}).Params()["warmup"]; ok {
		t.Fatal("warmup in the default params")
	}
	want := []int{5000, 5000, 1250, 1250, 313, 313, 79, 79, 20, 20}
	x := gauss(d, 8)
	for step, k := range want {
		f, err := c.Encode(Input{Name: "w", Step: int64(step), Data: x})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(f.Parts[1].Data) / 4; got != k {
			t.Fatalf("step %d: k = %d, want %d", step, got, k)
		}
		if _, err := Decode(f, nil); err != nil {
			t.Fatal(err)
		}
		if step == 0 {
			f.Step = 9 // a step-0 frame claiming a later step
			if _, err := Decode(f, nil); err == nil {
				t.Fatal("frame with the k of another step accepted")
			}
		}
	}
}

// TestDGCClip: the dgc memory clips g to the L2 norm before the momentum.
func TestDGCClip(t *testing.T) {
	m, err := NewMemory("dgc", MemoryOptions{ClipNorm: 1})
	if err != nil {
		t.Fatal(err)
	}
	g := []float32{3, 4} // norm 5
	st := &State{}
	p := m.Compensate(st, g)
	if p[0] != float32(0.2)*3 || p[1] != float32(0.2)*4 {
		t.Fatalf("p = %v, want g/5", p)
	}
	small := []float32{0.3, 0.4}
	st2 := &State{}
	if p := m.Compensate(st2, small); p[0] != 0.3 || p[1] != 0.4 {
		t.Fatalf("p = %v: g within the norm was changed", p)
	}
	if _, err := NewMemory("residual", MemoryOptions{ClipNorm: 1}); err == nil {
		t.Error("clipping accepted for residual")
	}
}
