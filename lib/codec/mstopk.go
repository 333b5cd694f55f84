package codec

import (
	"math"
	"slices"

	"trainwire.dev/lib/rng"
)

// MSTopKStats describes one MSTopK run, for tests and logs.
type MSTopKStats struct {
	// Probes is how many threshold probes ran (≤ N; fewer when k1 = k).
	Probes int
	// K1 is |ι1|, the elements at or above thres1.
	K1 int
	// Band is |ι2|, the elements in [thres2, thres1).
	Band int
	// Thres1 and Thres2 are the final thresholds (+Inf and 0 when unset).
	Thres1, Thres2 float64
}

// MSTopK is Algorithm 1 of Shi et al. (MLSys'21) with its two fixes
// (docs/compressor.md): thres1 starts at +Inf, not 0, and the window start
// is uniform in [0, |ι2| − (k − k1)] inclusive, drawn from stream key. It
// bisects ratio ∈ [0, 1] for N probes over thresholds ā + ratio·(u − ā)
// (ā = mean |x| accumulated in float64, u = max |x|), counting |x| ≥ t;
// then it takes ι1 = {|x| ≥ thres1} and a contiguous window of k − |ι1|
// elements of the band ι2 = {thres2 ≤ |x| < thres1}, both in index order.
// It returns exactly k ascending indices for 0 < k ≤ len(x) (all of them
// for k ≥ len(x), none for k ≤ 0); it stops probing once k1 = k.
// Counting passes run on nworkers goroutines with identical results.
func MSTopK(x []float32, k, N int, key uint64, nworkers int) ([]uint32, MSTopKStats) {
	d := len(x)
	st := MSTopKStats{Thres1: math.Inf(1)}
	if k <= 0 || d == 0 {
		return []uint32{}, st
	}
	if k >= d {
		return TopK(x, d, nworkers), st
	}
	cs := chunks(d, workers(nworkers, d), 64)
	// ā (per fixed block, so independent of nworkers) and u in one pass.
	var umax uint32
	sum := sumInOrder(blockReduce(x, nworkers, func(b []float32) float64 {
		atomicMax(&umax, maxMagSeq(b))
		return sumAbs(b)
	}))
	mean := sum / float64(d)
	u := float64(math.Float32frombits(umax))
	search := NewThresholdSearch(mean, u, int64(k), int64(d))
	// Each pass over x counts the probe and every probe that can follow it
	// in the next two steps (a tree of seven: after a count ≤ k or > k,
	// then again): three steps of the bisection a pass, with the counts of
	// one probe at a time.
	counts := make([][7]int, len(cs))
	for it := 0; it < N; it += 3 {
		var keys [7]uint32
		for j, t := range search.tree() {
			keys[j] = KeyCeil(t)
		}
		parallel(cs, func(c, lo, hi int) {
			counts[c] = countGE7(x[lo:hi], keys)
		})
		var nnz [7]int64
		for _, n := range counts {
			for j, v := range n {
				nnz[j] += int64(v)
			}
		}
		n, done := search.walk(nnz, N-it)
		st.Probes += n
		if done {
			break
		}
	}
	st.Thres1, st.Thres2 = search.Thres1, search.Thres2
	t1 := KeyCeil(search.Thres1)
	t2 := KeyCeil(search.Thres2)
	// ι1 and ι2, ascending: collected per chunk in parallel, then joined
	// in chunk order.
	c1, c2 := make([][]uint32, len(cs)), make([][]uint32, len(cs))
	parallel(cs, func(c, lo, hi int) {
		c1[c], c2[c] = splitGE(x[lo:hi], lo, t1, t2, nil, nil)
	})
	i1, i2 := slices.Concat(c1...), slices.Concat(c2...)
	st.K1, st.Band = len(i1), len(i2)
	need := k - len(i1)
	s := rng.Seq{Key: key}
	start := int(s.Below(uint64(len(i2)-need) + 1))
	out := make([]uint32, k)
	mergeAsc(out, i1, i2[start:start+need])
	return out, st
}

// KeyCeil returns the smallest magnitude key whose float is ≥ t (t ≥ 0;
// +Inf gives a key above every finite or infinite float).
func KeyCeil(t float64) uint32 {
	if math.IsInf(t, 1) {
		return 0x7f800001
	}
	if t <= 0 {
		return 0
	}
	f := float32(t)
	if float64(f) < t {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return math.Float32bits(f)
}

// ThresholdSearch is MSTopK's bisection for its two thresholds, shared by
// MSTopK and lib/gpu's device version (which counts on the GPU): probe t =
// ā + ratio·(u − ā) halves ratio's interval [l, r] ⊂ [0, 1] at each count;
// Thres1 is the probe with the most elements ≥ it among those with at most
// k (+Inf until one has), Thres2 the probe with the fewest among those
// with more than k (0 until one has).
type ThresholdSearch struct {
	Thres1, Thres2 float64

	mean, u, l, r, ratio, t float64
	k, k1, k2               int64
}

// NewThresholdSearch starts the search for k of d elements whose mean
// magnitude is mean and largest u.
func NewThresholdSearch(mean, u float64, k, d int64) ThresholdSearch {
	return ThresholdSearch{Thres1: math.Inf(1), mean: mean, u: u, r: 1, k: k, k2: d}
}

// Next returns the threshold Probe will return after the current probe
// is recorded with a count ≤ k (below) or > k, without changing s: a
// caller may count it in the same pass as the current one.
func (s ThresholdSearch) Next(below bool) float64 {
	if below {
		s.r = s.ratio
	} else {
		s.l = s.ratio
	}
	return s.Probe()
}

// tree returns the next probe (it calls Probe) and the six that can follow
// it in two more steps, in heap order: entry j's successor after a count
// ≤ k is entry 2j+1, after a count > k entry 2j+2.
func (s *ThresholdSearch) tree() [7]float64 {
	var t [7]float64
	t[0] = s.Probe()
	for j := range 3 {
		c := *s
		if j > 0 { // move c to node j, one step from the probe
			if j == 1 {
				c.r = c.ratio
			} else {
				c.l = c.ratio
			}
			c.Probe()
		}
		t[2*j+1], t[2*j+2] = c.Next(true), c.Next(false)
	}
	return t
}

// walk records the counts of tree's probes (in its order) from the root,
// following the counts, at most left of them; it returns how many it
// recorded and whether the search is done (Record's result).
func (s *ThresholdSearch) walk(nnz [7]int64, left int) (n int, done bool) {
	j := 0
	for n < min(3, left) {
		if n > 0 {
			s.Probe() // node j's threshold, whose count is in
		}
		n++
		if s.Record(nnz[j]) {
			return n, true
		}
		if nnz[j] <= s.k {
			j = 2*j + 1
		} else {
			j = 2*j + 2
		}
	}
	return n, false
}

// Probe returns the next threshold to count the elements at or above.
func (s *ThresholdSearch) Probe() float64 {
	s.ratio = s.l + (s.r-s.l)/2
	s.t = s.mean + s.ratio*(s.u-s.mean)
	return s.t
}

// Record takes the count at the last probe and reports whether it is
// exactly k (Thres1 is then final: the search can stop).
func (s *ThresholdSearch) Record(nnz int64) bool {
	if nnz <= s.k {
		s.r = s.ratio
		if nnz > s.k1 {
			s.k1, s.Thres1 = nnz, s.t
		}
	} else {
		s.l = s.ratio
		if nnz < s.k2 {
			s.k2, s.Thres2 = nnz, s.t
		}
	}
	return s.k1 == s.k
}
