package codec

import (
	"math"
	"slices"
)

// Exact top-k. The k elements of largest |x| are selected, ties broken by
// the lowest index, and returned as ascending indices. |x| is compared as
// the magnitude key math.Float32bits(v) &^ (1 << 31), which orders finite
// floats (and ±Inf) like |v| and makes −0 equal +0. Input must be NaN-free.

func magKey(v float32) uint32 { return math.Float32bits(v) & 0x7fffffff }

// The radix selections bucket a key by its top 11 bits (the exponent and
// three bits of mantissa).
const (
	shift = 20 // 31-bit keys: top 11 bits
	nb    = 1 << 11
)

// TopK returns the ascending indices of the k largest-magnitude elements
// of x (ties: lowest index), k clamped to [0, len(x)). It is a radix
// selection, not a sort: one parallel pass builds a histogram of the top
// 11 bits of every key, a second collects the indices above the bucket
// holding the k-th key and the candidates inside it, and the candidates
// (a few percent of x) are resolved by further radix passes; the per-chunk
// lists are then merged in index order. workers bounds the goroutines (0:
// GOMAXPROCS); the result does not depend on it.
func TopK(x []float32, k int, nworkers int) []uint32 {
	idx, _ := topK(x, k, nworkers)
	return idx
}

// topK is TopK that also reports whether x is free of NaN and ±Inf (from
// its histogram: their keys fill the top buckets), so the codec needs no
// separate validation pass.
func topK(x []float32, k int, nworkers int) ([]uint32, bool) {
	n := len(x)
	if k <= 0 || n == 0 || k >= n {
		if firstNonFinite(x) >= 0 {
			return nil, false
		}
	}
	if k <= 0 || n == 0 {
		return []uint32{}, true
	}
	if k >= n {
		out := make([]uint32, n)
		for i := range out {
			out[i] = uint32(i)
		}
		return out, true
	}
	if idx, ok, done := topKSampled(x, k, nworkers); done {
		return idx, ok
	}
	return topKFull(x, k, nworkers)
}

// topKFull is topK's general path: a histogram of every key.
func topKFull(x []float32, k int, nworkers int) ([]uint32, bool) {
	n := len(x)
	cs := chunks(n, workers(nworkers, n), 64)
	hists := make([][nb]uint32, len(cs))
	parallel(cs, func(c, lo, hi int) {
		// Four histograms, one per lane: gradients crowd a few buckets,
		// and increments of one counter in a row wait for each other.
		var h4 [4][nb]uint32
		xs := x[lo:hi]
		i := 0
		for ; i+4 <= len(xs); i += 4 {
			h4[0][magKey(xs[i])>>shift]++
			h4[1][magKey(xs[i+1])>>shift]++
			h4[2][magKey(xs[i+2])>>shift]++
			h4[3][magKey(xs[i+3])>>shift]++
		}
		for ; i < len(xs); i++ {
			h4[0][magKey(xs[i])>>shift]++
		}
		h := &hists[c]
		for j := range h {
			h[j] = h4[0][j] + h4[1][j] + h4[2][j] + h4[3][j]
		}
	})
	for c := range hists {
		for j := 0x7f800000 >> shift; j < nb; j++ {
			if hists[c][j] != 0 {
				return nil, false
			}
		}
	}
	// Find bucket b: count(> b) < k ≤ count(≥ b).
	above := 0
	b := nb - 1
	for ; b >= 0; b-- {
		t := 0
		for c := range hists {
			t += int(hists[c][b])
		}
		if above+t >= k {
			break
		}
		above += t
	}
	need := k - above
	// Pass 2: definite indices (bucket > b) and candidates (bucket == b).
	defs := make([][]uint32, len(cs))
	cands := make([][]uint32, len(cs))
	parallel(cs, func(c, lo, hi int) {
		nd := 0
		for j := b + 1; j < nb; j++ {
			nd += int(hists[c][j])
		}
		// bucket > b is key ≥ (b+1)<<shift ≤ 0x7f800000 (no key is
		// non-finite here), bucket b is the keys below that from b<<shift
		defs[c], cands[c] = splitGE(x[lo:hi], lo, uint32(b+1)<<shift, uint32(b)<<shift,
			make([]uint32, 0, nd), make([]uint32, 0, hists[c][b]))
	})
	// Resolve the candidates: the need largest, ties by lowest index.
	var all []uint32
	if len(cands) == 1 {
		all = cands[0]
	} else {
		all = slices.Concat(cands...)
	}
	sel := selectCandidates(x, all, need)
	// Merge per chunk: definite and selected are both ascending.
	out := make([]uint32, k)
	offs := make([]int, len(cs)+1)
	selBy := make([][]uint32, len(cs))
	si := 0
	for c, r := range cs {
		sj := si
		for sj < len(sel) && int(sel[sj]) < r[1] {
			sj++
		}
		selBy[c] = sel[si:sj]
		si = sj
		offs[c+1] = offs[c] + len(defs[c]) + len(selBy[c])
	}
	parallel(cs, func(c, _, _ int) {
		mergeAsc(out[offs[c]:offs[c+1]], defs[c], selBy[c])
	})
	return out, true
}

// selectCandidates returns, ascending, the need candidates (ascending
// indices into x) of largest key, ties by lowest index.
func selectCandidates(x []float32, cand []uint32, need int) []uint32 {
	if need >= len(cand) {
		return cand
	}
	// Radix over the low 20 bits, 10 at a time, narrowing the key prefix.
	var prefix, pmask uint32 = 0, 0 // keys must match prefix under pmask
	// All candidates share the top 11 bits already.
	for _, sh := range []uint{10, 0} {
		var h [1 << 10]int
		for _, i := range cand {
			kk := magKey(x[i])
			if kk&pmask == prefix {
				h[(kk>>sh)&0x3ff]++
			}
		}
		above := 0
		d := 1<<10 - 1
		for ; d >= 0; d-- {
			if above+h[d] >= need {
				break
			}
			above += h[d]
		}
		// Keys above this digit (under the prefix) are all in.
		prefix |= uint32(d) << sh
		pmask |= 0x3ff << sh
		need -= above
		_ = above
	}
	// Now prefix is the exact threshold key T on its low 20 bits; every
	// candidate key > T is in, and the first need with key == T.
	out := make([]uint32, 0, len(cand))
	t := prefix
	for _, i := range cand {
		kk := magKey(x[i]) & 0xfffff
		if kk > t {
			out = append(out, i)
		} else if kk == t && need > 0 {
			out = append(out, i)
			need--
		}
	}
	return out
}

func mergeAsc(dst, a, b []uint32) {
	i, j, o := 0, 0, 0
	for i < len(a) && j < len(b) {
		if a[i] < b[j] {
			dst[o] = a[i]
			i++
		} else {
			dst[o] = b[j]
			j++
		}
		o++
	}
	o += copy(dst[o:], a[i:])
	copy(dst[o:], b[j:])
}

// topkRef is TopK's plain twin: sort every index by (key desc, index asc),
// keep k, sort ascending.
func topkRef(x []float32, k int) []uint32 {
	n := len(x)
	k = max(0, min(k, n))
	idx := make([]uint32, n)
	for i := range idx {
		idx[i] = uint32(i)
	}
	slices.SortFunc(idx, func(a, b uint32) int {
		ka, kb := magKey(x[a]), magKey(x[b])
		if ka != kb {
			if ka > kb {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	out := idx[:k:k]
	slices.Sort(out)
	return out
}
