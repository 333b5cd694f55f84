package analysis

import "sort"

// MemoryTimeline is one device's allocator timeline (Dymem-style): the
// allocated and reserved bytes over time, the peak, and the peak per
// iteration.
type MemoryTimeline struct {
	Device         int64 `json:"device"`
	Events         int   `json:"events"`
	PeakBytes      int64 `json:"peak_allocated_bytes"`
	PeakTS         int64 `json:"peak_ts_ns"`
	ReservedAtPeak int64 `json:"reserved_at_peak_bytes"`
	// Fragmentation at the peak: reserved but not allocated, as a share
	// of reserved (0 when the trace has no reserved totals).
	FragAtPeak float64 `json:"frag_at_peak"`
	Allocs     int     `json:"allocs"`
	Frees      int     `json:"frees"`
	// StepPeaks are the peak allocated bytes in each ProfilerStep.
	StepPeaks []int64 `json:"step_peaks,omitempty"`
	// Points is the timeline, at most Options.MemPoints points (each
	// keeps the bucket's maximum, so the peak survives downsampling).
	Points []MemPoint `json:"points"`
}

// MemPoint is one point of a memory timeline.
type MemPoint struct {
	TS        int64 `json:"ts_ns"`
	Allocated int64 `json:"allocated"`
	Reserved  int64 `json:"reserved"`
}

func memory(r *Rank, o Options) []MemoryTimeline {
	if len(r.Mem) == 0 {
		return nil
	}
	byDev := map[int64][]Mem{}
	for _, m := range r.Mem {
		byDev[m.Device] = append(byDev[m.Device], m)
	}
	devs := make([]int64, 0, len(byDev))
	for d := range byDev {
		devs = append(devs, d)
	}
	sort.Slice(devs, func(i, j int) bool { return devs[i] < devs[j] })
	var out []MemoryTimeline
	for _, d := range devs {
		ms := byDev[d]
		mt := MemoryTimeline{Device: d, Events: len(ms)}
		var cur int64
		pts := make([]MemPoint, 0, len(ms))
		if len(r.Steps) > 0 {
			mt.StepPeaks = make([]int64, len(r.Steps))
		}
		for _, m := range ms {
			if m.Bytes > 0 {
				mt.Allocs++
			} else if m.Bytes < 0 {
				mt.Frees++
			}
			if m.Allocated >= 0 {
				cur = m.Allocated
			} else {
				cur += m.Bytes
			}
			p := MemPoint{TS: m.TS, Allocated: cur, Reserved: max(m.Reserved, 0)}
			pts = append(pts, p)
			if cur > mt.PeakBytes {
				mt.PeakBytes, mt.PeakTS, mt.ReservedAtPeak = cur, m.TS, p.Reserved
			}
			if st := r.StepOf(m.TS); st >= 0 {
				mt.StepPeaks[st] = max(mt.StepPeaks[st], cur)
			}
		}
		if mt.ReservedAtPeak > 0 {
			mt.FragAtPeak = round4(float64(mt.ReservedAtPeak-mt.PeakBytes) / float64(mt.ReservedAtPeak))
		}
		mt.Points = downsample(pts, o.MemPoints)
		out = append(out, mt)
	}
	return out
}

// downsample keeps at most n points, each the maximum of its bucket.
func downsample(p []MemPoint, n int) []MemPoint {
	if n <= 0 || len(p) <= n {
		return p
	}
	out := make([]MemPoint, 0, n)
	per := (len(p) + n - 1) / n
	for i := 0; i < len(p); i += per {
		best := p[i]
		for _, q := range p[i:min(i+per, len(p))] {
			if q.Allocated > best.Allocated {
				best = q
			}
		}
		out = append(out, best)
	}
	return out
}
