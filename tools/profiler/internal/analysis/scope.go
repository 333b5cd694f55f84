package analysis

// ScopeHTA restricts r to what Holistic Trace Analysis analyses, so that
// HTA's figures can be reproduced exactly: the complete ProfilerSteps
// only — the last step is dropped (the profiler may stop inside it), and
// so is every event that does not start inside [first step's start, last
// kept step's end) — and every time rounded to whole microseconds, starts
// up and ends down (HTA works in µs). The default (no scope) keeps every
// event in exact ns. ScopeHTA returns false, leaving r as it was, when r
// has fewer than two ProfilerSteps: nothing would remain.
func (r *Rank) ScopeHTA() bool {
	if len(r.Steps) < 2 {
		return false
	}
	r.Steps = r.Steps[:len(r.Steps)-1]
	lo, hi := r.Steps[0].TS, r.Steps[len(r.Steps)-1].End
	in := func(ts int64) bool { return ts >= lo && ts < hi }
	keep := r.Spans[:0]
	for _, s := range r.Spans {
		if in(s.TS) {
			keep = append(keep, roundUS(s))
		}
	}
	r.Spans = keep
	for i := range r.Steps {
		r.Steps[i] = roundUS(r.Steps[i])
	}
	for k, s := range r.Runtime {
		r.Runtime[k] = roundUS(s)
	}
	mem := r.Mem[:0]
	for _, m := range r.Mem {
		if in(m.TS) {
			m.TS = ceilUS(m.TS)
			mem = append(mem, m)
		}
	}
	r.Mem = mem
	return true
}

// roundUS rounds a span to whole µs, its start up and its end down (never
// before its start).
func roundUS(s Span) Span {
	s.TS, s.End = ceilUS(s.TS), floorUS(s.End)
	if s.End < s.TS {
		s.End = s.TS
	}
	return s
}

func ceilUS(ns int64) int64 { return -floorUS(-ns) }

func floorUS(ns int64) int64 {
	q := ns / 1000
	if ns%1000 != 0 && ns < 0 {
		q--
	}
	return q * 1000
}
