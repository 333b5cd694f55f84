package codec

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// withSampledMin runs f with topK's sampled path allowed down to len m.
func withSampledMin(t *testing.T, m int, f func()) {
	t.Helper()
	old := sampledMin
	sampledMin = m
	defer func() { sampledMin = old }()
	f()
}

// TestTopKSampled: the sampled path gives the reference's indices on every
// kind of input, whether it keeps its collection or declines (a sample
// that saw only large values, one that missed them, ties, constants,
// non-finite values), for every worker count; and it does take the
// sampled route on a Gaussian gradient.
func TestTopKSampled(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 7))
	const n = 2<<16 + 37 // two chunks of work for 2 or more workers
	cases := map[string][]float32{
		"gauss":    gauss(n, 5),
		"laplace":  laplace(n, 6),
		"constant": slices.Repeat([]float32{2}, n),
		"zeros":    make([]float32, n),
	}
	tied := make([]float32, n)
	for i := range tied {
		tied[i] = float32(r.IntN(5) - 2)
	}
	cases["tied"] = tied
	// Large values only in the blocks the sample reads, then only in
	// those it skips.
	inSample, outSample := gauss(n, 8), gauss(n, 9)
	for i := range inSample {
		if i/sampleBlock%sampleEvery == 0 {
			inSample[i] *= 1000
		} else {
			outSample[i] *= 1000
		}
	}
	cases["large-in-sample"], cases["large-out-of-sample"] = inSample, outSample
	ramp := make([]float32, n)
	for i := range ramp {
		ramp[i] = float32(i) * 1e-3
	}
	cases["ramp"] = ramp
	withSampledMin(t, 0, func() {
		for name, x := range cases {
			for _, k := range []int{1, 2, 17, n / 1000, n / 100, n / 9, n / 8} {
				want := topkRef(x, k)
				for _, w := range []int{1, 2, 5} {
					if got := TopK(x, k, w); !slices.Equal(got, want) {
						t.Fatalf("%s k=%d workers=%d: %d indices differ from the reference (%d)", name, k, w, len(got), len(want))
					}
				}
			}
		}
		for name, want := range map[string]bool{"gauss": true, "laplace": true,
			"constant": false, "tied": false, "large-in-sample": false, "large-out-of-sample": false} {
			if _, _, done := topKSampled(cases[name], n/100, 2); done != want {
				t.Errorf("%s: sampled path taken %v, want %v", name, done, want)
			}
		}
		x := gauss(5<<16+3, 10) // five chunks
		for _, w := range []int{3, 5} {
			if got, want := TopK(x, len(x)/100, w), topkRef(x, len(x)/100); !slices.Equal(got, want) {
				t.Fatalf("five chunks, workers=%d: differs from the reference", w)
			}
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			for _, at := range []int{0, sampleBlock, n - 1} { // in the sample, out of it, at the end
				y := slices.Clone(x)
				y[at] = bad
				if idx, finite := topK(y, len(y)/100, 2); finite || idx != nil {
					t.Errorf("%v at %d: reported finite", bad, at)
				}
			}
		}
	})
}

// TestKthKey: the radix selection over the collected keys against a sort.
func TestKthKey(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for trial := range 200 {
		var keys [][]uint32
		var all []uint32
		for range 1 + r.IntN(4) {
			ks := make([]uint32, r.IntN(50))
			for i := range ks {
				switch trial % 3 {
				case 0:
					ks[i] = r.Uint32N(0x7f800000)
				case 1:
					ks[i] = 0x3f800000 + r.Uint32N(8) // ties
				default:
					ks[i] = r.Uint32N(4) << 20
				}
			}
			keys = append(keys, ks)
			all = append(all, ks...)
		}
		if len(all) == 0 {
			continue
		}
		k := 1 + r.IntN(len(all))
		slices.Sort(all)
		slices.Reverse(all)
		wantT := all[k-1]
		wantTies := 0
		for _, v := range all[:k] {
			if v == wantT {
				wantTies++
			}
		}
		if T, ties := kthKey(keys, k); T != wantT || ties != wantTies {
			t.Fatalf("trial %d k=%d: %#x with %d ties, want %#x with %d", trial, k, T, ties, wantT, wantTies)
		}
	}
}
