package codec

import (
	"trainwire.dev/lib/rng"

	"fmt"
	"math"

	"trainwire.dev/lib/wire"
)

// Sparse encoding shared by topk, mstopk, dgc and threshold: part
// "values" (f32[k], x at the indices, bit for bit) then part "indices"
// (u32[k], strictly ascending, each < d). Payload 8k bytes.

func sparseFrame(c Codec, in Input, idx []uint32) *wire.Compressed {
	vals := make([]float32, len(idx))
	for j, i := range idx {
		vals[j] = in.Data[i]
	}
	k := int64(len(idx))
	return frame(c, in, part("values", wire.F32, f32bytes(vals), k), part("indices", wire.U32, u32bytes(idx), k))
}

func checkSparse(f *wire.Compressed, k int64) error {
	if err := checkParts(f, partSpec{"values", wire.F32, k}, partSpec{"indices", wire.U32, k}); err != nil {
		return err
	}
	d, _ := numel(f.Shape)
	idx := f.Parts[1].Data
	var prev int64 = -1
	for j := int64(0); j < k; j++ {
		i := int64(uint32(idx[4*j]) | uint32(idx[4*j+1])<<8 | uint32(idx[4*j+2])<<16 | uint32(idx[4*j+3])<<24)
		if i >= d {
			return fmt.Errorf("part \"indices\": index %d at %d is out of range [0, %d)", i, j, d)
		}
		if i <= prev {
			return fmt.Errorf("part \"indices\": index %d at %d does not ascend", i, j)
		}
		prev = i
	}
	return nil
}

func decodeSparse(f *wire.Compressed, dst []float32) {
	clear(dst)
	vals := f32s(f.Parts[0].Data)
	idx := f.Parts[1].Data
	for j, v := range vals {
		i := uint32(idx[4*j]) | uint32(idx[4*j+1])<<8 | uint32(idx[4*j+2])<<16 | uint32(idx[4*j+3])<<24
		dst[i] = v
	}
}

// kParams are the parameters of the fixed-k sparsifiers.
type kParams struct {
	ratio float64
	k     int64
}

func (p kParams) params(m map[string]any) map[string]any {
	m["ratio"] = p.ratio
	m["k"] = p.k
	return m
}

func readK(m map[string]any) (kParams, error) {
	r, err := pFloat(m, "ratio")
	if err != nil {
		return kParams{}, err
	}
	if !(r > 0 && r <= 1) {
		return kParams{}, fmt.Errorf("params: ratio %v not in (0, 1]", r)
	}
	k, err := pInt(m, "k", 0, math.MaxUint32)
	if err != nil {
		return kParams{}, err
	}
	return kParams{ratio: r, k: k}, nil
}

func (p kParams) kFor(shape []int64) int64 {
	d, _ := numel(shape)
	return KFor(d, p.ratio, p.k)
}

// ---- topk ----

type topk struct {
	kParams
	workers int
}

func (c *topk) Algo() string             { return "topk" }
func (c *topk) Params() map[string]any   { return c.params(map[string]any{}) }
func (c *topk) Size(shape []int64) int64 { return 8 * c.kFor(shape) }
func (c *topk) Encode(in Input) (*wire.Compressed, error) {
	if err := checkShape(in); err != nil {
		return nil, err
	}
	k := KFor(int64(len(in.Data)), c.ratio, c.k)
	idx, ok := topK(in.Data, int(k), c.workers)
	if !ok {
		return nil, CheckFinite(in.Name, in.Data)
	}
	return sparseFrame(c, in, idx), nil
}
func (c *topk) check(f *wire.Compressed) error { return checkSparse(f, c.kFor(f.Shape)) }
func (c *topk) decode(f *wire.Compressed, dst []float32) error {
	decodeSparse(f, dst)
	return nil
}

// ---- mstopk ----

type mstopk struct {
	kParams
	n       int64
	seed    uint64
	workers int
}

func (c *mstopk) Algo() string { return "mstopk" }
func (c *mstopk) Params() map[string]any {
	return c.params(map[string]any{"samplings": c.n, "seed": seedParam(c.seed)})
}
func (c *mstopk) Size(shape []int64) int64 { return 8 * c.kFor(shape) }
func (c *mstopk) Encode(in Input) (*wire.Compressed, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	k := KFor(int64(len(in.Data)), c.ratio, c.k)
	key := rng.Key(c.seed, in.Step, in.Name, rng.PurposeWindow)
	idx, _ := MSTopK(in.Data, int(k), int(c.n), key, c.workers)
	return sparseFrame(c, in, idx), nil
}
func (c *mstopk) check(f *wire.Compressed) error { return checkSparse(f, c.kFor(f.Shape)) }
func (c *mstopk) decode(f *wire.Compressed, dst []float32) error {
	decodeSparse(f, dst)
	return nil
}

// ---- threshold ----

type threshold struct {
	tau     float64
	workers int
}

func (c *threshold) Algo() string             { return "threshold" }
func (c *threshold) Params() map[string]any   { return map[string]any{"threshold": c.tau} }
func (c *threshold) Size(shape []int64) int64 { return -1 }
func (c *threshold) Encode(in Input) (*wire.Compressed, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	t := float32(c.tau)
	var idx []uint32
	for i, v := range in.Data {
		if float32(math.Abs(float64(v))) >= t {
			idx = append(idx, uint32(i))
		}
	}
	if idx == nil {
		idx = []uint32{}
	}
	return sparseFrame(c, in, idx), nil
}
func (c *threshold) check(f *wire.Compressed) error {
	if len(f.Parts) != 2 {
		return fmt.Errorf("%d parts, want 2 (values, indices)", len(f.Parts))
	}
	k, err := wire.Numel(f.Parts[0].Shape)
	if err != nil {
		return fmt.Errorf("part %q: %w", f.Parts[0].Name, err)
	}
	d, _ := numel(f.Shape)
	if k > d {
		return fmt.Errorf("%d values for %d elements", k, d)
	}
	if err := checkSparse(f, k); err != nil {
		return err
	}
	for j, v := range f32s(f.Parts[0].Data) {
		if !(float64(abs32(v)) >= float64(float32(c.tau))) {
			return fmt.Errorf("part \"values\": |%v| at %d is below the threshold %v", v, j, c.tau)
		}
	}
	return nil
}
func (c *threshold) decode(f *wire.Compressed, dst []float32) error {
	decodeSparse(f, dst)
	return nil
}

// ---- randomk ----

// randomk sends k values at indices drawn without replacement (Floyd's
// algorithm over the stream keyed by seed, name and step), so the indices
// never travel: part "values" f32[k] only, in ascending index order.
type randomk struct {
	kParams
	seed     uint64
	unbiased bool
}

func (c *randomk) Algo() string { return "randomk" }
func (c *randomk) Params() map[string]any {
	return c.params(map[string]any{"seed": seedParam(c.seed), "unbiased": c.unbiased})
}
func (c *randomk) Size(shape []int64) int64 { return 4 * c.kFor(shape) }
func (c *randomk) Encode(in Input) (*wire.Compressed, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	d := int64(len(in.Data))
	k := KFor(d, c.ratio, c.k)
	idx := RandomIndices(d, k, rng.Key(c.seed, in.Step, in.Name, rng.PurposeIndices))
	vals := make([]float32, k)
	for j, i := range idx {
		vals[j] = in.Data[i]
	}
	return frame(c, in, part("values", wire.F32, f32bytes(vals), k)), nil
}
func (c *randomk) check(f *wire.Compressed) error {
	return checkParts(f, partSpec{"values", wire.F32, c.kFor(f.Shape)})
}
func (c *randomk) decode(f *wire.Compressed, dst []float32) error {
	clear(dst)
	d := int64(len(dst))
	vals := f32s(f.Parts[0].Data)
	idx := RandomIndices(d, int64(len(vals)), rng.Key(c.seed, f.Step, f.Name, rng.PurposeIndices))
	scale := float32(1)
	if c.unbiased && len(vals) > 0 {
		scale = float32(float64(d) / float64(len(vals)))
	}
	for j, i := range idx {
		dst[i] = vals[j] * scale
	}
	return nil
}

// RandomIndices returns k distinct indices of [0, d), ascending, drawn by
// Floyd's algorithm from the stream key: for j = d−k … d−1, t = uniform in
// [0, j]; take t unless already taken, else take j.
func RandomIndices(d, k int64, key uint64) []uint32 {
	k = max(0, min(k, d))
	out := make([]uint32, 0, k)
	if k == d {
		for i := range d {
			out = append(out, uint32(i))
		}
		return out
	}
	set := make([]uint64, (d+63)/64)
	s := rng.Seq{Key: key}
	for j := d - k; j < d; j++ {
		t := int64(s.Below(uint64(j + 1)))
		if set[t/64]&(1<<(t%64)) != 0 {
			t = j
		}
		set[t/64] |= 1 << (t % 64)
	}
	for w, bits := range set {
		for bits != 0 {
			b := trailingZeros(bits)
			out = append(out, uint32(w*64+b))
			bits &= bits - 1
		}
	}
	return out
}

func init() {
	kOpts := map[string]string{"ratio": "0.01", "k": "0 (from ratio)"}
	register(factory{
		info: Info{Algo: "topk", Kind: "sparsification", Params: kOpts,
			SizeFormula: "8k, k = ceil(ratio·d) or --k, in [1, d]",
			Summable:    "sparse sum: frames add by merging indices (scatter-add) into a sparse COO frame",
			Doc:         "exact top-k by |x| (radix selection, parallel), ties to the lowest index"},
		fromOptions: func(o Options) (Codec, error) { return &topk{kParams{o.Ratio, o.K}, o.Workers}, nil },
		fromParams: func(m map[string]any) (Codec, error) {
			p, err := readK(m)
			return &topk{kParams: p}, err
		},
	})
	register(factory{
		info: Info{Algo: "mstopk", Kind: "sparsification",
			Params:      map[string]string{"ratio": "0.01", "k": "0 (from ratio)", "samplings": "30", "seed": "0"},
			SizeFormula: "8k, k = ceil(ratio·d) or --k, in [1, d]",
			Summable:    "sparse sum (as topk)",
			Doc:         "MSTopK (Shi et al. MLSys'21 Alg. 1, thres1=+Inf and inclusive-window fixes): exactly k, approximate"},
		fromOptions: func(o Options) (Codec, error) {
			n := o.Samplings
			if n == 0 {
				n = 30
			}
			if n < 1 || n > 64 {
				return nil, fmt.Errorf("codec: mstopk: samplings %d not in [1, 64]", n)
			}
			return &mstopk{kParams{o.Ratio, o.K}, n, o.Seed, o.Workers}, nil
		},
		fromParams: func(m map[string]any) (Codec, error) {
			p, err := readK(m)
			if err != nil {
				return nil, err
			}
			n, err := pInt(m, "samplings", 1, 64)
			if err != nil {
				return nil, err
			}
			s, err := pUint(m, "seed")
			return &mstopk{kParams: p, n: n, seed: s}, err
		},
	})
	register(factory{
		info: Info{Algo: "randomk", Kind: "sparsification",
			Params:      map[string]string{"ratio": "0.01", "k": "0 (from ratio)", "seed": "0", "unbiased": "false"},
			SizeFormula: "4k (values only: indices come from seed, name and step)",
			Summable:    "yes: frames of the same name, step and seed share indices, values add element-wise (allreduce)",
			Doc:         "k indices without replacement from a stream keyed by (seed, name, step); unbiased scales by d/k"},
		fromOptions: func(o Options) (Codec, error) { return &randomk{kParams{o.Ratio, o.K}, o.Seed, o.Unbiased}, nil },
		fromParams: func(m map[string]any) (Codec, error) {
			p, err := readK(m)
			if err != nil {
				return nil, err
			}
			s, err := pUint(m, "seed")
			if err != nil {
				return nil, err
			}
			u, err := pBool(m, "unbiased")
			return &randomk{kParams: p, seed: s, unbiased: u}, err
		},
	})
	register(factory{
		info: Info{Algo: "threshold", Kind: "sparsification",
			Params:      map[string]string{"threshold": "0.01"},
			SizeFormula: "8·nnz, nnz = count(|x| ≥ threshold): data-dependent (the one exception)",
			Summable:    "sparse sum (as topk)",
			Doc:         "every element with |x| ≥ threshold"},
		fromOptions: func(o Options) (Codec, error) {
			t := o.Threshold
			if t == 0 {
				t = 0.01
			}
			if !(t > 0) || math.IsInf(t, 0) {
				return nil, fmt.Errorf("codec: threshold: %v is not a positive number", t)
			}
			return &threshold{t, o.Workers}, nil
		},
		fromParams: func(m map[string]any) (Codec, error) {
			t, err := pFloat(m, "threshold")
			if err == nil && !(t > 0) {
				err = fmt.Errorf("params: threshold %v is not positive", t)
			}
			return &threshold{tau: t}, err
		},
	})
}
