package sched

import (
	"fmt"
	"math"
	"sort"
)

// Interval is a busy period of the training traffic, in seconds (or any
// unit) relative to anything.
type Interval struct{ Start, End float64 }

// IdleSpans returns the lengths of IdleIntervals.
func IdleSpans(begin, end float64, busy []Interval) []float64 {
	var out []float64
	for _, iv := range IdleIntervals(begin, end, busy) {
		out = append(out, iv.End-iv.Start)
	}
	return out
}

// IdleIntervals returns the gaps between the busy intervals inside
// [begin, end] (overlapping intervals are merged), in time order, relative
// to begin. The gap after the last interval, up to end, is included.
func IdleIntervals(begin, end float64, busy []Interval) []Interval {
	b := append([]Interval(nil), busy...)
	sort.Slice(b, func(i, j int) bool { return b[i].Start < b[j].Start })
	var out []Interval
	cur := begin
	for _, iv := range b {
		s, e := math.Max(iv.Start, begin), math.Min(iv.End, end)
		if e <= s {
			continue
		}
		if s > cur {
			out = append(out, Interval{cur - begin, s - begin})
		}
		if e > cur {
			cur = e
		}
	}
	if end > cur {
		out = append(out, Interval{cur - begin, end - begin})
	}
	return out
}

// Profile is the averaged idle spans of several iterations.
type Profile struct {
	// Spans are the mean idle spans, in order; Starts their mean start
	// relative to the iteration's start (when known).
	Spans  []float64 `json:"spans"`
	Starts []float64 `json:"starts,omitempty"`
	// Iters is the number of iterations averaged.
	Iters int `json:"iters"`
	// NormStd is the largest normalized standard deviation (std/mean) of
	// a span across iterations; Gemini uses the plan when it is < 10%.
	NormStd float64 `json:"norm_std"`
}

// Stable reports whether the spans varied less than 10% (C-RP-3).
func (p *Profile) Stable() bool { return p.NormStd < 0.10 }

// Average averages the idle spans of several iterations span by span. The
// iterations must have the same number of spans (the timeline "remains
// almost constant across iterations"); the most common count is used and
// the others are skipped.
func Average(iters [][]float64) (*Profile, error) {
	if len(iters) == 0 {
		return nil, fmt.Errorf("sched: no iterations to average")
	}
	count := map[int]int{}
	for _, it := range iters {
		count[len(it)]++
	}
	best, bestN := -1, 0
	for l, c := range count {
		if c > bestN || (c == bestN && l > best) {
			best, bestN = l, c
		}
	}
	if best == 0 {
		return nil, fmt.Errorf("sched: no idle spans in the profiled iterations")
	}
	p := &Profile{Spans: make([]float64, best), Iters: bestN}
	for _, it := range iters {
		if len(it) == best {
			for i, v := range it {
				p.Spans[i] += v
			}
		}
	}
	for i := range p.Spans {
		p.Spans[i] /= float64(bestN)
	}
	for i, mean := range p.Spans {
		var ss float64
		for _, it := range iters {
			if len(it) == best {
				d := it[i] - mean
				ss += d * d
			}
		}
		if mean > 0 {
			if ns := math.Sqrt(ss/float64(bestN)) / mean; ns > p.NormStd {
				p.NormStd = ns
			}
		}
	}
	return p, nil
}

// AverageIntervals averages idle intervals (relative to each iteration's
// start) span by span: the mean start and length of each.
func AverageIntervals(iters [][]Interval) (*Profile, error) {
	lens := make([][]float64, len(iters))
	for i, it := range iters {
		for _, iv := range it {
			lens[i] = append(lens[i], iv.End-iv.Start)
		}
	}
	p, err := Average(lens)
	if err != nil {
		return nil, err
	}
	p.Starts = make([]float64, len(p.Spans))
	for _, it := range iters {
		if len(it) == len(p.Spans) {
			for i, iv := range it {
				p.Starts[i] += iv.Start
			}
		}
	}
	for i := range p.Starts {
		p.Starts[i] /= float64(p.Iters)
	}
	return p, nil
}
