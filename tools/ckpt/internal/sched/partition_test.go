package sched

import (
	"math"
	"testing"
)

func golden(c float64) Params {
	return Params{Size: c, Replicas: 2, Buffer: 0.128, Parts: 4, Bandwidth: 1.5625, Alpha: 0.001, Mu: 0.9}
}

// D.4.4: the golden example of the fixed Algorithm 6.2.
func TestPartitionGolden(t *testing.T) {
	spans := []float64{0.2, 1.6, 0.05, 0.4, 0.3}
	s, err := Partition(spans, golden(0.5))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Chunks) != 17 {
		t.Fatalf("%d chunks, want 17: %+v", len(s.Chunks), s.Chunks)
	}
	count := map[int]int{}
	for _, c := range s.Chunks {
		count[c.Span]++
	}
	if count[0] != 9 || count[1] != 8 {
		t.Errorf("chunks per span %v, want 9 in span 0 (8 × 0.032 + 0.01119) and 8 in span 1", count)
	}
	if math.Abs(s.PerSpan[0]-0.2672) > 5e-5 || math.Abs(s.PerSpan[1]-0.2328) > 5e-5 {
		t.Errorf("per span %v, want 0.2672 and 0.2328 GB", s.PerSpan)
	}
	if math.Abs(s.Chunks[8].Size-0.01119) > 5e-6 {
		t.Errorf("span 0's last chunk %.5f GB, want 0.01119", s.Chunks[8].Size)
	}
	if s.Overflow != 0 {
		t.Errorf("overflow %g, want none", s.Overflow)
	}
	// Offsets are contiguous.
	var off float64
	for _, c := range s.Chunks {
		if math.Abs(c.Offset-off) > 1e-12 || c.Size > 0.032+1e-12 {
			t.Fatalf("chunk %+v: offset should be %g, size ≤ R/p", c, off)
		}
		off += c.Size
	}

	s, err = Partition(spans, golden(2.0))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Chunks) != 64 {
		t.Errorf("C=2 GB: %d chunks, want 64", len(s.Chunks))
	}
	if math.Abs(s.PerSpan[0]-0.2672) > 5e-5 || math.Abs(s.PerSpan[1]-1.7328) > 5e-5 || s.Overflow != 0 {
		t.Errorf("C=2 GB: per span %v overflow %g, want 0.2672 then 1.7328 GB, none", s.PerSpan, s.Overflow)
	}
	// C = 5 GB does not fit in μ·t of the real spans: the rest lands in the
	// last span, and the run is flagged.
	s, err = Partition(spans, golden(5.0))
	if err != nil {
		t.Fatal(err)
	}
	var real float64
	for i := 0; i < 4; i++ {
		real += s.PerSpan[i]
	}
	if s.Overflow <= 0 || math.Abs(s.PerSpan[4]-(5-real)) > 1e-9 {
		t.Errorf("C=5 GB: per span %v overflow %g, want the rest in the last span and overflow flagged", s.PerSpan, s.Overflow)
	}
}

// μ is honoured: the time used in each real span stays within μ·t.
func TestPartitionWithinMu(t *testing.T) {
	spans := []float64{0.3, 0.07, 0.9, 0.0005, 0.5, 10}
	p := Params{Size: 3, Replicas: 3, Buffer: 0.128, Parts: 4, Bandwidth: 1.5625, Alpha: 0.001, Mu: 0.8}
	s, err := Partition(spans, p)
	if err != nil {
		t.Fatal(err)
	}
	used := make([]float64, len(spans))
	perDest := map[int]float64{}
	for _, c := range s.Chunks {
		used[c.Span] += p.Alpha + c.Size/p.Bandwidth
		perDest[c.Dest] += c.Size
	}
	for i := 0; i < len(spans)-1; i++ {
		if used[i] > p.Mu*spans[i]+1e-9 {
			t.Errorf("span %d: %g s used of μ·t = %g", i, used[i], p.Mu*spans[i])
		}
	}
	if len(perDest) != 2 || math.Abs(perDest[0]-3) > 1e-9 || math.Abs(perDest[1]-3) > 1e-9 {
		t.Errorf("per destination %v, want 2 remote replicas of 3", perDest)
	}
	bc, _, err := PartitionBytes(spans, Params{Size: 3e9 + 7, Replicas: 3, Buffer: 128e6, Parts: 4, Bandwidth: 1.5625e9, Alpha: 0.001, Mu: 0.8})
	if err != nil {
		t.Fatal(err)
	}
	next := map[int]int64{}
	for _, c := range bc {
		if c.Offset != next[c.Dest] || c.Size <= 0 || c.Size > 32e6 {
			t.Fatalf("byte chunk %+v: want offset %d, 0 < size ≤ 32e6", c, next[c.Dest])
		}
		next[c.Dest] += c.Size
	}
	if next[0] != 3e9+7 || next[1] != 3e9+7 {
		t.Errorf("byte chunks cover %v, want 3e9+7 per destination", next)
	}
}

func TestPartitionRejects(t *testing.T) {
	bad := []Params{
		{Size: 1, Replicas: 2, Buffer: 1, Parts: 1, Bandwidth: 1, Mu: 0},
		{Size: 1, Replicas: 2, Buffer: 1, Parts: 1, Bandwidth: 0, Mu: 0.5},
		{Size: 1, Replicas: 0, Buffer: 1, Parts: 1, Bandwidth: 1, Mu: 0.5},
		{Size: 1, Replicas: 2, Buffer: 0, Parts: 1, Bandwidth: 1, Mu: 0.5},
	}
	for _, p := range bad {
		if _, err := Partition([]float64{1}, p); err == nil {
			t.Errorf("%+v accepted", p)
		}
	}
	if _, err := Partition(nil, golden(1)); err == nil {
		t.Error("no spans accepted")
	}
}

func TestProfile(t *testing.T) {
	busy := []Interval{{0.1, 0.2}, {0.15, 0.3}, {0.5, 0.6}}
	got := IdleSpans(0, 1, busy)
	want := []float64{0.1, 0.2, 0.4}
	for i := range want {
		if len(got) != 3 || math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("IdleSpans = %v, want %v", got, want)
		}
	}
	p, err := Average([][]float64{{1, 2}, {1.1, 2}, {0.9, 2}, {5}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Iters != 3 || math.Abs(p.Spans[0]-1) > 1e-12 || !p.Stable() {
		t.Errorf("Average = %+v", p)
	}
	p, _ = Average([][]float64{{1}, {2}})
	if p.Stable() {
		t.Errorf("spans 1 and 2 called stable: %+v", p)
	}
}
