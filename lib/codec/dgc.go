package codec

import (
	"slices"
	"trainwire.dev/lib/rng"

	"fmt"
	"math"

	"trainwire.dev/lib/wire"
)

// dgc is Deep Gradient Compression's selection (Lin et al., ICLR'18) made
// exact-size: k = ceil(ratio·d). Below 16384 elements it is exact top-k.
// Otherwise it samples every stride-th |x| (stride 100 up to 2^20
// elements, else 1000) from a start drawn from the stream keyed (seed,
// name, step), takes as threshold the ceil(1.1·k·n_s/d)-th largest sampled
// magnitude, and lowers it by ×0.8 (at most 10 times) until at least k
// elements reach it; the exact top-k of those candidates is sent (DGC's
// hierarchical selection). If 10 rounds do not reach k it falls back to
// exact top-k. Momentum correction and masking are the "dgc" memory.
//
// With warmup W > 0 (param "warmup", absent when off) the density follows
// DGC's warm-up schedule: at step s < 4W it is max(ratio, 4^−(⌊s/W⌋+1))
// — 25%, 6.25%, 1.5625%, 0.390625% (sparsity 75% → 93.75% → 98.4375% →
// 99.6%), W steps each — and k = max(k, ceil(density·d)); from step 4W
// on (and for negative steps) the codec's own k. The size is still a pure
// function of (shape, params, step); Size reports the steady state.
type dgc struct {
	kParams
	seed    uint64
	warmup  int64
	workers int
}

// kAt is the k of a frame of d elements at step.
func (c *dgc) kAt(d, step int64) int64 {
	k := KFor(d, c.ratio, c.k)
	if c.warmup > 0 && step >= 0 && step < 4*c.warmup {
		dens := math.Pow(0.25, float64(step/c.warmup+1))
		k = max(k, KFor(d, dens, 0))
	}
	return k
}

func (c *dgc) Algo() string { return "dgc" }
func (c *dgc) Params() map[string]any {
	m := c.params(map[string]any{"seed": seedParam(c.seed)})
	if c.warmup > 0 {
		m["warmup"] = c.warmup
	}
	return m
}
func (c *dgc) Size(shape []int64) int64 { return 8 * c.kFor(shape) }
func (c *dgc) check(f *wire.Compressed) error {
	d, _ := numel(f.Shape)
	return checkSparse(f, c.kAt(d, f.Step))
}
func (c *dgc) decode(f *wire.Compressed, dst []float32) error {
	decodeSparse(f, dst)
	return nil
}

func (c *dgc) Encode(in Input) (*wire.Compressed, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	k := int(c.kAt(int64(len(in.Data)), in.Step))
	idx, _ := DGCSelect(in.Data, k, rng.Key(c.seed, in.Step, in.Name, rng.PurposeSample), c.workers)
	return sparseFrame(c, in, idx), nil
}

// DGCSelect returns dgc's k ascending indices of x and the final
// threshold (0 when exact top-k was used).
func DGCSelect(x []float32, k int, key uint64, nworkers int) ([]uint32, float32) {
	d := len(x)
	if d < 16384 || k >= d {
		return TopK(x, k, nworkers), 0
	}
	stride := 1000
	if d <= 1<<20 {
		stride = 100
	}
	s := rng.Seq{Key: key}
	start := int(s.Below(uint64(stride)))
	sample := make([]float32, 0, d/stride+1)
	for i := start; i < d; i += stride {
		sample = append(sample, x[i])
	}
	ks := int(math.Ceil(1.1 * float64(k) * float64(len(sample)) / float64(d)))
	ks = max(1, min(ks, len(sample)))
	top := TopK(sample, ks, 1)
	thr := float32(math.Inf(1))
	for _, i := range top {
		thr = min(thr, float32(math.Abs(float64(sample[i]))))
	}
	cs := chunks(d, workers(nworkers, d), 64)
	counts := make([][3]int, len(cs))
	// Rounds r, r+1 and r+2 lower the threshold by ×0.8 each, known in
	// advance: one pass counts three rounds (countGE3).
	for round := 0; round <= 10; round += 3 {
		thrs := [3]float32{thr, thr * 0.8, thr * 0.8 * 0.8}
		var keys [3]uint32
		for j, t := range thrs {
			keys[j] = math.Float32bits(t)
		}
		parallel(cs, func(c, lo, hi int) {
			counts[c] = countGE3(x[lo:hi], keys)
		})
		for j := range thrs {
			if round+j > 10 {
				break
			}
			total := 0
			for _, n := range counts {
				total += n[j]
			}
			if total >= k && thrs[j] > 0 {
				return dgcCollect(x, k, cs, keys[j]), thrs[j]
			}
		}
		thr = thrs[2] * 0.8
	}
	return TopK(x, k, nworkers), 0
}

// dgcCollect returns the k largest-magnitude elements among those whose
// key is ≥ tk (at least k of them): collected per chunk in parallel from
// AVX2 compare masks (splitGE), then the exact top-k of their values.
func dgcCollect(x []float32, k int, cs [][2]int, tk uint32) []uint32 {
	per := make([][]uint32, len(cs))
	parallel(cs, func(c, lo, hi int) {
		per[c], _ = splitGE(x[lo:hi], lo, tk, tk, nil, nil)
	})
	cand := slices.Concat(per...)
	vals := make([]float32, len(cand))
	for j, i := range cand {
		vals[j] = x[i]
	}
	sel := TopK(vals, k, 1)
	out := make([]uint32, k)
	for j, p := range sel {
		out[j] = cand[p]
	}
	return out
}

func init() {
	register(factory{
		info: Info{Algo: "dgc", Kind: "sparsification",
			Params:      map[string]string{"ratio": "0.01", "k": "0 (from ratio)", "seed": "0", "warmup": "0 (off; steps per warm-up stage)"},
			SizeFormula: "8k, k = ceil(ratio·d) or --k, in [1, d] (warm-up: k = max(k, ceil(4^−(⌊step/warmup⌋+1)·d)) for step < 4·warmup)",
			Summable:    "sparse sum (as topk)",
			Doc:         "DGC: sampled threshold (≤10 ×0.8 rounds), exact top-k of the candidates; use --memory dgc for momentum correction"},
		fromOptions: func(o Options) (Codec, error) {
			if o.DGCWarmup < 0 {
				return nil, fmt.Errorf("codec: dgc: warmup %d is negative", o.DGCWarmup)
			}
			return &dgc{kParams{o.Ratio, o.K}, o.Seed, o.DGCWarmup, o.Workers}, nil
		},
		fromParams: func(m map[string]any) (Codec, error) {
			p, err := readK(m)
			if err != nil {
				return nil, err
			}
			s, err := pUint(m, "seed")
			if err != nil {
				return nil, fmt.Errorf("%w", err)
			}
			c := &dgc{kParams: p, seed: s}
			if _, ok := m["warmup"]; ok {
				if c.warmup, err = pInt(m, "warmup", 1, math.MaxInt32); err != nil {
					return nil, err
				}
			}
			return c, nil
		},
	})
}
