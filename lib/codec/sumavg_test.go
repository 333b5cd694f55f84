package codec

import (
	"math"
	"testing"

	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// TestSumAverage: SumWith{Average} is Sum with the f32 accumulator
// divided by the number of frames once, before rounding to the codec's
// type; majority votes are unchanged.
func TestSumAverage(t *testing.T) {
	for _, algo := range []string{"randomk", "fp16", "bf16", "powersgd", "topk", "signsgd"} {
		c := mustNew(t, algo, Options{Ratio: 0.1, Seed: 3, Rank: 2})
		var fs []*wire.Compressed
		for r := range 3 {
			f, err := c.Encode(Input{Name: "w", Step: 4, Shape: []int64{20, 50}, Data: gauss(1000, uint64(40+r))})
			if err != nil {
				t.Fatal(algo, err)
			}
			fs = append(fs, f)
		}
		if algo == "powersgd" {
			for _, f := range fs[1:] { // P after its allreduce: shared
				f.Parts[0] = fs[0].Parts[0]
			}
		}
		sum, err := Sum(fs)
		if err != nil {
			t.Fatal(algo, err)
		}
		avg, err := SumWith(fs, SumOptions{Average: true})
		if err != nil {
			t.Fatal(algo, err)
		}
		s, a := denseOf(t, sum), denseOf(t, avg)
		for i := range s {
			want := s[i] / 3
			switch algo {
			case "signsgd":
				want = s[i]
			case "fp16", "bf16":
				// Rounded to the half type once, from the f32 average: within
				// one half-precision rounding of the decoded sum / 3.
				if d := math.Abs(float64(a[i] - want)); d > math.Abs(float64(want))/128+1e-7 {
					t.Fatalf("%s[%d]: average %v, sum/3 %v", algo, i, a[i], want)
				}
				continue
			case "powersgd":
				// Q is averaged, so P·(ΣQ/3)ᵀ is sum/3 up to the roundings of the product.
				if d := math.Abs(float64(a[i] - want)); d > 1e-5*math.Abs(float64(want))+1e-7 {
					t.Fatalf("%s[%d]: average %v, sum/3 %v", algo, i, a[i], want)
				}
				continue
			}
			if math.Float32bits(a[i]) != math.Float32bits(want) {
				t.Fatalf("%s[%d]: average %v, want sum/3 = %v", algo, i, a[i], want)
			}
		}
	}
}

// denseOf decodes a Sum result (a compressed frame or a COO sparse one).
func denseOf(t *testing.T, f wire.Frame) []float32 {
	t.Helper()
	switch f := f.(type) {
	case *wire.Compressed:
		x, err := Decode(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		return x
	case *wire.Sparse:
		x := make([]float32, 1000)
		idx, vals := tensor.Uint32sOrCopy(f.Indices), f32s(f.Values)
		for j, i := range idx {
			x[i] = vals[j]
		}
		return x
	}
	t.Fatalf("unexpected %T", f)
	return nil
}
