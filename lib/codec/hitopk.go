package codec

import (
	"fmt"
	"math"
	"slices"

	"trainwire.dev/lib/rng"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// hitopk is HiTopKComm's row selection (seed-topk.md §2, step 2) as a
// codec: a tensor of shape [rows, …] is rows of w = d/rows elements (a
// vector: rows of one element), and the k = ceil(ratio·rows) (or --k)
// rows of largest L2 norm are sent. Parts "values" f32[k, w] (the rows,
// bit for bit) and "indices" u32[k] (row indices, strictly ascending).
//
// Two row selectors (param "selector"):
//
//   - "l2" (default): exact. Rows ranked by Σx² accumulated in float64 in
//     element order, ties to the lowest row — hashsync's hitopk scheme
//     ranks rows the same way.
//   - "mstopk": MSTopK (Algorithm 1, with "samplings" probes and the
//     window keyed by (seed, name, step)) on the row norms
//     float32(√Σx²): exactly k rows, approximate, as the paper's step 2.
//
// On a vector the norms are the magnitudes, so hitopk is topk's
// selection with "l2" and mstopk's with "mstopk" (the same indices).
type hitopk struct {
	kParams
	selector string
	n        int64
	seed     uint64
	workers  int
}

// Row selectors of hitopk.
const (
	SelectorL2     = "l2"
	SelectorMSTopK = "mstopk"
)

func (c *hitopk) Algo() string { return "hitopk" }
func (c *hitopk) Params() map[string]any {
	m := c.params(map[string]any{"selector": c.selector})
	if c.selector == SelectorMSTopK {
		m["samplings"], m["seed"] = c.n, seedParam(c.seed)
	}
	return m
}

// rowsOf splits shape into rows (its first dimension; a vector's
// length) of w elements.
func rowsOf(shape []int64) (rows, w int64) {
	d, _ := numel(shape)
	if len(shape) < 2 || d == 0 {
		return d, 1
	}
	return shape[0], d / shape[0]
}

func (c *hitopk) kRows(shape []int64) (k, rows, w int64) {
	rows, w = rowsOf(shape)
	return KFor(rows, c.ratio, c.k), rows, w
}

func (c *hitopk) Size(shape []int64) int64 {
	k, _, w := c.kRows(shape)
	return 4 * k * (w + 1)
}

func (c *hitopk) Encode(in Input) (*wire.Compressed, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	shape := shapeOrFlat(in.Shape, len(in.Data))
	k, rows, w := c.kRows(shape)
	idx := c.selectRows(in, int(k), int(rows), int(w))
	vals := make([]float32, 0, len(idx)*int(w))
	for _, r := range idx {
		vals = append(vals, in.Data[int(r)*int(w):int(r+1)*int(w)]...)
	}
	kk := int64(len(idx))
	return frame(c, in, part("values", wire.F32, f32bytes(vals), kk, w), part("indices", wire.U32, u32bytes(idx), kk)), nil
}

// selectRows returns the ascending indices of the k rows hitopk sends.
// Rows of one element take the element kernels: x² is exact in float64
// and monotone in |x|, and √x² = |x|, so TopK and MSTopK on x give the
// same rows as the general path (TestHiTopKVector).
func (c *hitopk) selectRows(in Input, k, rows, w int) []uint32 {
	if c.selector == SelectorMSTopK {
		key := rng.Key(c.seed, in.Step, in.Name, rng.PurposeWindow)
		norms := in.Data
		if w != 1 {
			norms = make([]float32, rows)
			for r, s := range rowSquares(in.Data, rows, w, c.workers) {
				norms[r] = float32(math.Sqrt(s))
			}
		}
		idx, _ := MSTopK(norms, k, int(c.n), key, c.workers)
		return idx
	}
	if w == 1 {
		return TopK(in.Data, k, c.workers)
	}
	return topRowsL2(rowSquares(in.Data, rows, w, c.workers), k)
}

// rowSquares returns Σx² of every row of w elements of x, in float64 in
// element order, rows in parallel.
func rowSquares(x []float32, rows, w, nworkers int) []float64 {
	ss := make([]float64, rows)
	cs := chunks(rows, workers(nworkers, len(x)), 1)
	parallel(cs, func(_ int, lo, hi int) {
		for r := lo; r < hi; r++ {
			var s float64
			for _, v := range x[r*w : (r+1)*w] {
				s += float64(v) * float64(v)
			}
			ss[r] = s
		}
	})
	return ss
}

// topRowsL2 returns the ascending indices of the k largest of ss (sums of
// squares: ≥ 0, not NaN), ties to the lowest index: the k-th largest by
// selection, then the rows above it and the first rows equal to it, in
// index order.
func topRowsL2(ss []float64, k int) []uint32 {
	idx := make([]uint32, 0, min(k, len(ss)))
	if k <= 0 {
		return idx
	}
	if k >= len(ss) {
		for i := range ss {
			idx = append(idx, uint32(i))
		}
		return idx
	}
	kth := kthLargest(slices.Clone(ss), k)
	above := 0
	for _, s := range ss {
		if s > kth {
			above++
		}
	}
	ties := k - above
	for i, s := range ss {
		if s > kth || (s == kth && ties > 0) {
			if s == kth {
				ties--
			}
			idx = append(idx, uint32(i))
		}
	}
	return idx
}

// kthLargest returns the k-th largest of a (1 ≤ k ≤ len(a)), reordering
// a: quickselect with a three-way partition (equal values cost nothing)
// around the median of three.
func kthLargest(a []float64, k int) float64 {
	for {
		p := median3(a[0], a[len(a)/2], a[len(a)-1])
		// a[:gt] > p, a[gt:lt] == p, a[lt:] < p
		gt, i, lt := 0, 0, len(a)
		for i < lt {
			switch {
			case a[i] > p:
				a[gt], a[i] = a[i], a[gt]
				gt++
				i++
			case a[i] < p:
				lt--
				a[lt], a[i] = a[i], a[lt]
			default:
				i++
			}
		}
		switch {
		case k <= gt:
			a = a[:gt]
		case k <= lt:
			return p
		default:
			a, k = a[lt:], k-lt
		}
	}
}

func median3(a, b, c float64) float64 {
	return max(min(a, b), min(max(a, b), c))
}

func (c *hitopk) check(f *wire.Compressed) error {
	k, rows, w := c.kRows(f.Shape)
	if err := checkParts(f, partSpec{"values", wire.F32, k * w}, partSpec{"indices", wire.U32, k}); err != nil {
		return err
	}
	prev := int64(-1)
	for j, r := range tensor.Uint32sOrCopy(f.Parts[1].Data) {
		if int64(r) >= rows || int64(r) <= prev {
			return fmt.Errorf("part \"indices\": row %d at %d is out of range [0, %d) or does not ascend", r, j, rows)
		}
		prev = int64(r)
	}
	return nil
}

func (c *hitopk) decode(f *wire.Compressed, dst []float32) error {
	clear(dst)
	_, _, w := c.kRows(f.Shape)
	vals := f32s(f.Parts[0].Data)
	for j, r := range tensor.Uint32sOrCopy(f.Parts[1].Data) {
		copy(dst[int64(r)*w:int64(r+1)*w], vals[int64(j)*w:int64(j+1)*w])
	}
	return nil
}

func init() {
	register(factory{
		info: Info{Algo: "hitopk", Kind: "sparsification",
			Params: map[string]string{"ratio": "0.01 (of the rows)", "k": "0 (from ratio)", "selector": "l2 (exact) or mstopk",
				"samplings": "30 (mstopk)", "seed": "0 (mstopk)"},
			SizeFormula: "4k(w+1), k = ceil(ratio·rows) or --k rows of w = d/rows (rows = shape[0]; a vector: rows of 1)",
			Summable:    "sparse sum of rows: the union of the row indices, equal rows added in frame order (row-sparse COO)",
			Doc:         "HiTopKComm's row selection: the k rows of largest L2 norm, exact (l2) or by MSTopK on the norms (mstopk)"},
		fromOptions: func(o Options) (Codec, error) {
			sel := o.RowSelector
			if sel == "" {
				sel = SelectorL2
			}
			n := o.Samplings
			if n == 0 {
				n = 30
			}
			return newHiTopK(kParams{o.Ratio, o.K}, sel, n, o.Seed, o.Workers)
		},
		fromParams: func(m map[string]any) (Codec, error) {
			p, err := readK(m)
			if err != nil {
				return nil, err
			}
			sel, ok := m["selector"].(string)
			if !ok {
				return nil, fmt.Errorf("params: \"selector\" missing or not a string")
			}
			if sel != SelectorMSTopK {
				return newHiTopK(p, sel, 30, 0, 0)
			}
			n, err := pInt(m, "samplings", 1, 64)
			if err != nil {
				return nil, err
			}
			s, err := pUint(m, "seed")
			if err != nil {
				return nil, err
			}
			return newHiTopK(p, sel, n, s, 0)
		},
	})
}

func newHiTopK(p kParams, sel string, n int64, seed uint64, nworkers int) (Codec, error) {
	if sel != SelectorL2 && sel != SelectorMSTopK {
		return nil, fmt.Errorf("codec: hitopk: selector %q, want %q or %q", sel, SelectorL2, SelectorMSTopK)
	}
	if n < 1 || n > 64 {
		return nil, fmt.Errorf("codec: hitopk: samplings %d not in [1, 64]", n)
	}
	return &hitopk{p, sel, n, seed, nworkers}, nil
}
