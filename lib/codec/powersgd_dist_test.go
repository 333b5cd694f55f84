package codec

import (
	"math"
	"testing"
)

// The distributed PowerSGD steps: the matrix view, a deterministic warm
// start kept in the state, orthonormal P, and P·Qᵀ as the codec decodes.
func TestPowerSGDPlan(t *testing.T) {
	c, err := New("powersgd", Options{Rank: 2, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PowerSGDPlanFor(mustNew(t, "topk", Options{}), []int64{4, 4}); err == nil {
		t.Fatal("topk accepted as powersgd")
	}
	if pl, err := PowerSGDPlanFor(c, []int64{7}); err != nil || pl.Matrix || pl.N != 7 {
		t.Fatalf("vector: %+v %v", pl, err)
	}
	pl, err := PowerSGDPlanFor(c, []int64{5, 2, 3})
	if err != nil || !pl.Matrix || pl.N != 5 || pl.M != 6 || pl.R != 2 {
		t.Fatalf("matrix: %+v %v", pl, err)
	}
	st1, st2 := &State{}, &State{}
	q1, q2 := pl.WarmQ("w", st1), pl.WarmQ("w", st2)
	for i := range q1 {
		if q1[i] != q2[i] {
			t.Fatal("warm start differs between states")
		}
	}
	x := make([]float32, 30)
	for i := range x {
		x[i] = float32(i%7) - 3
	}
	p := pl.P(x, q1)
	pl.Orthonormalize(p)
	for a := range 2 {
		for b := range 2 {
			var dot float64
			for i := range 5 {
				dot += float64(p[i*2+a]) * float64(p[i*2+b])
			}
			want := 0.0
			if a == b {
				want = 1
			}
			if math.Abs(dot-want) > 1e-5 {
				t.Fatalf("P columns %d·%d = %v", a, b, dot)
			}
		}
	}
	q := pl.Q(x, p)
	pl.SetQ(st1, q)
	if got := pl.WarmQ("w", st1); got[0] != q[0] {
		t.Fatal("SetQ not kept")
	}
	dst := make([]float32, 30)
	pl.Decode(dst, p, q)
	var s float32
	for t := range 2 {
		s += p[t] * q[t]
	}
	if dst[0] != s {
		t.Fatalf("decode[0] = %v, want %v", dst[0], s)
	}
}
