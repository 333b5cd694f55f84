package codec

import (
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
type dgc struct {
	kParams
	seed    uint64
	workers int
}

func (c *dgc) Algo() string { return "dgc" }
func (c *dgc) Params() map[string]any {
	return c.params(map[string]any{"seed": seedParam(c.seed)})
}
func (c *dgc) Size(shape []int64) int64       { return 8 * c.kFor(shape) }
func (c *dgc) check(f *wire.Compressed) error { return checkSparse(f, c.kFor(f.Shape)) }
func (c *dgc) decode(f *wire.Compressed, dst []float32) error {
	decodeSparse(f, dst)
	return nil
}

func (c *dgc) Encode(in Input) (*wire.Compressed, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	k := int(KFor(int64(len(in.Data)), c.ratio, c.k))
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
	counts := make([]int, len(cs))
	for round := 0; round <= 10; round++ {
		tk := math.Float32bits(thr)
		parallel(cs, func(c, lo, hi int) {
			n := 0
			for _, v := range x[lo:hi] {
				if magKey(v) >= tk {
					n++
				}
			}
			counts[c] = n
		})
		total := 0
		for _, n := range counts {
			total += n
		}
		if total >= k && thr > 0 {
			cand := make([]uint32, 0, total)
			vals := make([]float32, 0, total)
			for i, v := range x {
				if magKey(v) >= tk {
					cand = append(cand, uint32(i))
					vals = append(vals, v)
				}
			}
			sel := TopK(vals, k, 1)
			out := make([]uint32, k)
			for j, p := range sel {
				out[j] = cand[p]
			}
			return out, thr
		}
		if round < 10 {
			thr *= 0.8
		}
	}
	return TopK(x, k, nworkers), 0
}

func init() {
	register(factory{
		info: Info{Algo: "dgc", Kind: "sparsification",
			Params:      map[string]string{"ratio": "0.01", "k": "0 (from ratio)", "seed": "0"},
			SizeFormula: "8k, k = ceil(ratio·d) or --k, in [1, d]",
			Summable:    "sparse sum (as topk)",
			Doc:         "DGC: sampled threshold (≤10 ×0.8 rounds), exact top-k of the candidates; use --memory dgc for momentum correction"},
		fromOptions: func(o Options) (Codec, error) { return &dgc{kParams{o.Ratio, o.K}, o.Seed, o.Workers}, nil },
		fromParams: func(m map[string]any) (Codec, error) {
			p, err := readK(m)
			if err != nil {
				return nil, err
			}
			s, err := pUint(m, "seed")
			if err != nil {
				return nil, fmt.Errorf("%w", err)
			}
			return &dgc{kParams: p, seed: s}, nil
		},
	})
}
