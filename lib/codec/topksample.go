package codec

import "math"

// Sampled top-k. Before a histogram of every key, topK estimates from a
// sample of x a threshold t a little below the k-th largest key, collects
// every element whose key is ≥ t together with its key (one pass), and,
// when that collected at least k, selects the k largest among them by
// radix over the collected keys alone. The result is exact whatever the
// sample says: every element outside the collection is below t, so below
// every one of the k selected; when the collection holds fewer than k (the
// sample overestimated t) or would be large (k a big share of x, or mass
// ties), topK takes its full path instead. On ResNet-101's gradient (44.5
// M floats, k = 1 %) this replaces the histogram pass over all of x by one
// over a sixteenth, and the gathers x[i] of the candidates from all over x
// by reads of a compact key array.

// sampledMin is the smallest len(x) for which topK samples (a variable so
// that tests can send small inputs down this path).
var sampledMin = 1 << 17

const (
	sampleBlock = 1024 // elements of a sampled block
	sampleEvery = 16   // one block of every sampleEvery is sampled
)

// topKSampled is topK by a sampled threshold. done is false, with nothing
// computed that the full path needs, when it declined.
func topKSampled(x []float32, k int, nworkers int) (idx []uint32, finite, done bool) {
	n := len(x)
	if n < sampledMin || k > n/8 {
		return nil, false, false
	}
	cs := chunks(n, workers(nworkers, n), 64)
	t, expect, ok := sampleThreshold(x, k, cs)
	if !ok || expect > 4*k+n/32 {
		// A non-finite or tiny sample, or one that expects a large
		// collection (mass ties): the full path needs no keys.
		return nil, false, false
	}
	// Collect (index, key) of every element with key ≥ t, per chunk; give
	// up where a chunk collects far more than the sample predicted.
	limit := 2*expect/len(cs) + 4*k/len(cs) + 1024
	idxs := make([][]uint32, len(cs))
	keys := make([][]uint32, len(cs))
	over := make([]bool, len(cs))
	parallel(cs, func(c, lo, hi int) {
		idxs[c], keys[c], over[c] = collectGE(x[lo:hi], lo, t, limit)
	})
	total := 0
	for c := range cs {
		if over[c] {
			return nil, false, false
		}
		total += len(idxs[c])
	}
	if total < k {
		return nil, false, false
	}
	for c := range keys {
		for _, kk := range keys[c] {
			if kk >= 0x7f800000 {
				return nil, false, true
			}
		}
	}
	T, ties := kthKey(keys, k)
	return takeSelected(idxs, keys, T, ties, k), true, true
}

// sampleThreshold histograms the keys of one block of sampleEvery in each
// chunk and returns a bucket bound t whose sampled count, scaled up,
// exceeds k with a margin, and that scaled count. ok is false when the
// sample holds a non-finite key or too few elements at or above any
// finite bucket.
func sampleThreshold(x []float32, k int, cs [][2]int) (t uint32, expect int, ok bool) {
	hists := make([][nb]uint32, len(cs))
	sampled := make([]int, len(cs))
	parallel(cs, func(c, lo, hi int) {
		h := &hists[c]
		for b := lo; b < hi; b += sampleBlock * sampleEvery {
			for _, v := range x[b:min(b+sampleBlock, hi)] {
				h[magKey(v)>>shift]++
			}
			sampled[c] += min(sampleBlock, hi-b)
		}
	})
	m := 0
	for _, s := range sampled {
		m += s
	}
	scale := float64(len(x)) / float64(m)
	// Want the scaled count above k by 25 % and five standard deviations
	// of a binomial count of k·m/n.
	km := float64(k) / scale
	want := 1.25*km + 5*math.Sqrt(km) + 16
	acc := 0
	for b := nb - 1; b >= 0; b-- {
		cnt := 0
		for c := range hists {
			cnt += int(hists[c][b])
		}
		if cnt > 0 && b >= 0x7f800000>>shift {
			return 0, 0, false
		}
		acc += cnt
		if float64(acc) >= want {
			if b == 0 {
				return 0, 0, false // every element: the full path's case
			}
			return uint32(b) << shift, int(float64(acc) * scale), true
		}
	}
	return 0, 0, false
}

// collectGE returns, ascending, lo + the positions of the elements of x
// whose key is ≥ t (t > 0) and their keys; over reports that there were
// more than limit (the lists then stop there).
func collectGE(x []float32, lo int, t uint32, limit int) (idx, keys []uint32, over bool) {
	idx = make([]uint32, 0, min(limit, 1024+len(x)/64))
	keys = make([]uint32, 0, cap(idx))
	over = !eachGE(x, t, func(i int) bool {
		if len(idx) == limit {
			return false
		}
		idx = append(idx, uint32(lo+i))
		keys = append(keys, magKey(x[i]))
		return true
	})
	return idx, keys, over
}

// kthKey returns the k-th largest of the keys (1 ≤ k ≤ their count) and
// how many keys equal to it are among the k largest: a radix selection
// over 11, 10 and 10 bits.
func kthKey(keys [][]uint32, k int) (T uint32, ties int) {
	var prefix, pmask uint32
	need := k
	for _, d := range []struct {
		sh   uint
		bits uint
	}{{20, 11}, {10, 10}, {0, 10}} {
		h := make([]int, 1<<d.bits)
		digit := uint32(1<<d.bits - 1)
		for _, ks := range keys {
			for _, kk := range ks {
				if kk&pmask == prefix {
					h[(kk>>d.sh)&digit]++
				}
			}
		}
		above := 0
		v := len(h) - 1
		for ; v > 0 && above+h[v] < need; v-- {
			above += h[v]
		}
		prefix |= uint32(v) << d.sh
		pmask |= digit << d.sh
		need -= above
	}
	return prefix, need
}

// takeSelected returns, ascending, the k indices whose key is > T and the
// first ties of those whose key is T (the lowest indices), from per-chunk
// ascending lists.
func takeSelected(idxs, keys [][]uint32, T uint32, ties, k int) []uint32 {
	out := make([]uint32, 0, k)
	for c := range idxs {
		ks := keys[c]
		for j, i := range idxs[c] {
			if kk := ks[j]; kk > T {
				out = append(out, i)
			} else if kk == T && ties > 0 {
				out = append(out, i)
				ties--
			}
		}
	}
	return out
}
