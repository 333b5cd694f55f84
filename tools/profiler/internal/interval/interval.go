// Package interval is the interval arithmetic of trace analysis: unions,
// intersections and gaps of half-open [start, end) nanosecond intervals.
package interval

import "sort"

// I is a half-open interval [S, E).
type I struct{ S, E int64 }

// Len returns E − S (0 for an empty interval).
func (i I) Len() int64 { return max(0, i.E-i.S) }

// Union returns the union of xs as sorted, disjoint intervals (touching
// intervals merge). xs is sorted in place.
func Union(xs []I) []I {
	sort.Slice(xs, func(a, b int) bool { return xs[a].S < xs[b].S })
	var out []I
	for _, x := range xs {
		if x.E <= x.S {
			continue
		}
		if n := len(out); n > 0 && x.S <= out[n-1].E {
			out[n-1].E = max(out[n-1].E, x.E)
			continue
		}
		out = append(out, x)
	}
	return out
}

// Total returns the summed length of disjoint intervals.
func Total(xs []I) int64 {
	var t int64
	for _, x := range xs {
		t += x.Len()
	}
	return t
}

// Intersect returns the intersection of two sorted, disjoint sets.
func Intersect(a, b []I) []I {
	var out []I
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		s, e := max(a[i].S, b[j].S), min(a[i].E, b[j].E)
		if s < e {
			out = append(out, I{s, e})
		}
		if a[i].E < b[j].E {
			i++
		} else {
			j++
		}
	}
	return out
}

// Clip returns the parts of sorted, disjoint xs inside w.
func Clip(xs []I, w I) []I {
	return Intersect(xs, []I{w})
}
