// Package gen synthesizes deterministic sparse-gradient workloads per rank,
// step and tensor, with the generators of seed-zen.md §5.2: the Zipf
// embedding model (natural sparsity: density, overlap, densification and
// skew together), the Bernoulli pool model (exact control of the overlap
// ratio) and the top-k model (DGC-like sparsification).
package gen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"sync"

	"trainwire.dev/tools/hashsync/internal/scheme"
)

// Spec describes a workload.
type Spec struct {
	// Model is "zipf", "bernoulli" or "topk".
	Model string
	// Rows and Width shape the tensor: Rows rows of Width elements.
	Rows, Width int
	// Density is the fraction of rows present on one rank (d_G).
	Density float64
	// Skew: the Zipf exponent s (zipf); the concentration F ≥ 1 of the
	// pool in the first Rows/F rows (bernoulli); the ratio of the first
	// layer's scale to the last one's (topk).
	Skew float64
	// Overlap: the inclusion probability q of a pool row, which is the
	// expected pairwise overlap ratio (bernoulli); the share of the shared
	// signal in the gradient (topk). Unused by zipf (set by Skew).
	Overlap float64
	// Exact draws values that are small multiples of 1/16, whose sums
	// are exact in any order (for comparing schemes that sum in
	// different orders bit for bit); otherwise values are normal.
	Exact bool
	// Seed is the job's seed; ranks, steps and tensors derive theirs.
	Seed uint64
}

// Presets are the paper's embedding workloads (Table 1 densities; shapes
// inferred, seed-zen.md §2.1). deepfm is the 1M × 16 table, not
// the paper's 214M parameters: scale with --rows.
var Presets = map[string]Spec{
	"deepfm": {Model: "zipf", Rows: 1_000_000, Width: 16, Density: 0.028, Skew: 1.0},
	"lstm":   {Model: "zipf", Rows: 793_471, Width: 512, Density: 0.0113, Skew: 1.0},
	"nmt":    {Model: "zipf", Rows: 218_750, Width: 512, Density: 0.0247, Skew: 1.0},
	"bert":   {Model: "zipf", Rows: 30_522, Width: 768, Density: 0.0106, Skew: 1.0},
}

// Check validates the spec.
func (s Spec) Check() error {
	switch {
	case s.Model != "zipf" && s.Model != "bernoulli" && s.Model != "topk":
		return fmt.Errorf("model %q: want zipf, bernoulli or topk", s.Model)
	case s.Rows < 1 || s.Width < 1 || s.Rows > math.MaxUint32:
		return fmt.Errorf("%d rows of width %d: want at least 1 row of 1 element, at most 2^32−1 rows", s.Rows, s.Width)
	case !(s.Density >= 0 && s.Density <= 1):
		return fmt.Errorf("density %g outside [0, 1]", s.Density)
	case s.Model == "zipf" && !(s.Skew > 0):
		return fmt.Errorf("zipf exponent (--skew) %g: want > 0", s.Skew)
	case s.Model == "bernoulli" && !(s.Skew >= 1):
		return fmt.Errorf("bernoulli concentration (--skew) %g: want ≥ 1", s.Skew)
	case s.Model == "bernoulli" && !(s.Overlap > 0 && s.Overlap <= 1):
		return fmt.Errorf("bernoulli overlap %g: want (0, 1]", s.Overlap)
	case s.Model == "bernoulli" && s.Density/s.Overlap*s.Skew > 1:
		return fmt.Errorf("bernoulli: a pool of density/overlap = %g of the rows does not fit in the first 1/%g of them", s.Density/s.Overlap, s.Skew)
	case s.Model == "topk" && !(s.Overlap > 0 && s.Overlap <= 1):
		return fmt.Errorf("topk overlap (signal share) %g: want (0, 1]", s.Overlap)
	}
	return nil
}

func (s Spec) rng(parts ...uint64) *rand.Rand {
	h := s.Seed*0x9E3779B97F4A7C15 + 0x632BE59BD9B4E019
	for _, p := range parts {
		h = (h ^ p) * 0xBF58476D1CE4E5B9
		h ^= h >> 31
	}
	return rand.New(rand.NewPCG(h, s.Seed^0xD1B54A32D192ED03))
}

// Generate returns rank's gradient of tensor k at step.
func (s Spec) Generate(name string, rank, step, k int) *scheme.Tensor {
	t := &scheme.Tensor{Name: name, Rows: s.Rows, Width: s.Width}
	rng := s.rng(1, uint64(rank), uint64(step), uint64(k))
	var rows []uint32
	var counts []int
	switch s.Model {
	case "zipf":
		rows, counts = s.zipf(rng)
	case "bernoulli":
		rows = s.bernoulli(rng, step, k)
	case "topk":
		return s.topk(name, rng, step, k)
	}
	t.Idx = rows
	t.Val = make([]float32, len(rows)*s.Width)
	for i := range t.Val {
		c := 1
		if counts != nil {
			c = counts[i/s.Width]
		}
		t.Val[i] = s.value(rng, c)
	}
	return t
}

func (s Spec) value(rng *rand.Rand, count int) float32 {
	if s.Exact {
		v := float32(rng.IntN(8)+1) / 16
		if rng.IntN(2) == 0 {
			v = -v
		}
		return v
	}
	// A row's gradient sums one contribution per occurrence in the batch.
	for {
		v := float32(rng.NormFloat64() * math.Sqrt(float64(count)))
		if v != 0 {
			return v
		}
	}
}

// everyRow is zipf at density 1: every row is touched, once, plus one
// Zipf draw per row on top (the hot rows' counts grow as the skew says).
// The general path would draw until the rarest row is hit — T ≈ 37·n·H_n
// draws into a map, found by a search over T that is superlinear too.
func (s Spec) everyRow(rng *rand.Rand) ([]uint32, []int) {
	cdf, _ := zipfCDF(s.Rows, s.Skew)
	rows := make([]uint32, s.Rows)
	counts := make([]int, s.Rows)
	for v := range rows {
		rows[v], counts[v] = uint32(v), 1
	}
	for range s.Rows {
		v := min(sort.SearchFloat64s(cdf, rng.Float64()), s.Rows-1)
		counts[v]++
	}
	return rows, counts
}

// zipfCDF is the cumulative distribution of Zipf(s) over n ranks, and the
// probabilities it sums.
func zipfCDF(n int, s float64) (cdf, p []float64) {
	p = make([]float64, n)
	tot := 0.0
	for v := range n {
		p[v] = math.Pow(float64(v+1), -s)
		tot += p[v]
	}
	cdf = make([]float64, n)
	acc := 0.0
	for v := range n {
		p[v] /= tot
		acc += p[v]
		cdf[v] = acc
	}
	return cdf, p
}

// zipfTable is the cumulative distribution of Zipf(s) over n ranks and the
// number of draws T that gives an expected density d.
type zipfTable struct {
	cdf []float64
	T   int
}

var zipfCache sync.Map

func zipfFor(n int, s, d float64) *zipfTable {
	type key struct {
		n    int
		s, d float64
	}
	k := key{n, s, d}
	if v, ok := zipfCache.Load(k); ok {
		return v.(*zipfTable)
	}
	cdf, p := zipfCDF(n, s)
	// Expected unique rows after T draws: Σ 1 − (1−p_v)^T; solve for d·n.
	lp := make([]float64, n)
	for v := range n {
		lp[v] = math.Log1p(-math.Min(p[v], 1-1e-12))
	}
	unique := func(T float64) float64 {
		u := 0.0
		for _, l := range lp {
			u += -math.Expm1(T * l)
		}
		return u
	}
	target := d * float64(n)
	lo, hi := 0.0, 1.0
	for unique(hi) < target && hi < 1e12 {
		hi *= 2
	}
	for range 60 {
		mid := (lo + hi) / 2
		if unique(mid) < target {
			lo = mid
		} else {
			hi = mid
		}
	}
	z := &zipfTable{cdf: cdf, T: int(math.Round(hi))}
	zipfCache.Store(k, z)
	return z
}

// zipf draws T tokens and returns the touched rows (ascending) with their
// counts.
func (s Spec) zipf(rng *rand.Rand) ([]uint32, []int) {
	if s.Density == 0 {
		return nil, nil
	}
	if s.Density >= 1 {
		return s.everyRow(rng)
	}
	z := zipfFor(s.Rows, s.Skew, s.Density)
	cnt := map[uint32]int{}
	for range z.T {
		u := rng.Float64()
		v := sort.SearchFloat64s(z.cdf, u)
		if v >= s.Rows {
			v = s.Rows - 1
		}
		cnt[uint32(v)]++
	}
	rows := make([]uint32, 0, len(cnt))
	for r := range cnt {
		rows = append(rows, r)
	}
	slices.Sort(rows)
	counts := make([]int, len(rows))
	for i, r := range rows {
		counts[i] = cnt[r]
	}
	return rows, counts
}

// bernoulli: a pool of density/overlap·rows rows in the first rows/skew
// (the same on every rank: it depends on the seed, step and tensor only),
// each row included with probability overlap.
func (s Spec) bernoulli(rng *rand.Rand, step, k int) []uint32 {
	span := max(1, int(float64(s.Rows)/s.Skew))
	pp := s.Density / s.Overlap * float64(s.Rows) / float64(span)
	pool := s.rng(2, uint64(step), uint64(k))
	var rows []uint32
	for r := range span {
		if pool.Float64() < pp && rng.Float64() < s.Overlap {
			rows = append(rows, uint32(r))
		}
	}
	return rows
}

// topk: g_w = S + σ·N_w with a shared signal S whose scale falls by Skew
// from the first to the last of 8 layers, and σ = 1/overlap − 1; the
// rank keeps its top density·rows rows by L2 norm.
func (s Spec) topk(name string, rng *rand.Rand, step, k int) *scheme.Tensor {
	n, w := s.Rows, s.Width
	sig := s.rng(3, uint64(step), uint64(k))
	sigma := 1/s.Overlap - 1
	g := make([]float32, n*w)
	for i := range g {
		layer := float64(i*8/len(g)) / 7
		scale := math.Pow(math.Max(s.Skew, 1), -layer)
		g[i] = float32(sig.NormFloat64()*scale + sigma*rng.NormFloat64())
	}
	keep := int(math.Round(s.Density * float64(n)))
	norm := make([]float64, n)
	for r := range n {
		for _, v := range g[r*w : r*w+w] {
			norm[r] += float64(v) * float64(v)
		}
	}
	order := make([]int32, n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(a, b int32) int {
		if norm[a] != norm[b] {
			if norm[a] > norm[b] {
				return -1
			}
			return 1
		}
		return int(a - b)
	})
	sel := order[:keep]
	slices.Sort(sel)
	t := &scheme.Tensor{Name: name, Rows: n, Width: w, Idx: make([]uint32, keep), Val: make([]float32, 0, keep*w)}
	for i, r := range sel {
		t.Idx[i] = uint32(r)
		row := g[int(r)*w : int(r)*w+w]
		if s.Exact {
			for c := range row {
				row[c] = s.value(rng, 1)
			}
		}
		t.Val = append(t.Val, row...)
	}
	return t
}
