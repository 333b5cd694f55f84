package espresso

import "math"

// ckEvery is the distance between the evaluator's checkpoints.
const ckEvery = 8

// evaluator computes F for a strategy that changes a few gradients at a
// time. It keeps the timeline's state every ckEvery gradients, so a change
// at gradient i re-simulates from the checkpoint at or before i, and
// stops as soon as a lower bound on F reaches the caller's bound: what
// has ended so far, and for each resource its free time plus what the
// remaining gradients will hold it for (every resource serves them in
// order, so none of that can start earlier), and the backprop still to
// run. Both are exact: a pruned strategy could not have beaten the bound.
type evaluator struct {
	in *Instance
	ps []*prog
	ck []*state // ck[m]: the state before gradient m·ckEvery
	// valid is how many checkpoints hold the current strategy's state.
	valid int
	// suf[j] is the resource time of gradients j..n−1, and sufC[j] their
	// backprop; entries j <= dirty are stale.
	suf   [][nRes]float64
	sufC  []float64
	dirty int
	work  *state
	// pre is the state before gradient preAt, kept while gradients before
	// it keep their programs (-1: none).
	pre   *state
	preAt int

	evals, pruned int
}

func newEvaluator(in *Instance, ps []*prog) *evaluator {
	ev := &evaluator{in: in, ps: append([]*prog(nil), ps...), valid: 1,
		suf: make([][nRes]float64, in.n+1), sufC: make([]float64, in.n+1), dirty: in.n - 1, work: in.newState(),
		pre: in.newState(), preAt: -1}
	nck := (in.n + ckEvery - 1) / ckEvery
	ev.ck = make([]*state, nck+1)
	for i := range ev.ck {
		ev.ck[i] = in.newState()
	}
	for j := in.n - 1; j >= 0; j-- {
		ev.sufC[j] = ev.sufC[j+1] + in.compute[j]
	}
	ev.refresh()
	return ev
}

// set changes gradient i's program.
func (ev *evaluator) set(i int, p *prog) {
	if ev.ps[i] == p {
		return
	}
	ev.ps[i] = p
	ev.valid = min(ev.valid, i/ckEvery+1)
	if i < ev.preAt {
		ev.preAt = -1
	}
	ev.dirty = max(ev.dirty, i)
}

// refresh recomputes the stale suffix sums.
func (ev *evaluator) refresh() {
	for j := ev.dirty; j >= 0; j-- {
		ev.suf[j] = ev.suf[j+1]
		for r := range nRes {
			ev.suf[j][r] += ev.ps[j].usage[r]
		}
	}
	ev.dirty = -1
}

// lower is a lower bound on F given the state before gradient j.
func (ev *evaluator) lower(st *state, j int) float64 {
	lb := fmax(st.maxEnd, st.bpEnd+ev.sufC[j])
	if j > ev.dirty {
		u := &ev.suf[j]
		for r := range resCPU {
			lb = fmax(lb, st.free[r]+u[r])
		}
		if u[resCPU] > 0 {
			m := st.cpu[0]
			for _, f := range st.cpu[1:] {
				m = min(m, f)
			}
			lb = fmax(lb, m+u[resCPU]/float64(len(st.cpu)))
		}
	}
	return ev.in.Job.ForwardNS + lb + ev.in.Job.UpdateNS
}

// eval returns F of the current strategy, or +Inf when it cannot be
// below bound.
func (ev *evaluator) eval(bound float64) float64 { return ev.evalCut(bound, -1, nil) }

// evalCut is eval that also gives up (+Inf) when cut, called with the
// state right after gradient at, returns true.
func (ev *evaluator) evalCut(bound float64, at int, cut func(*state) bool) float64 {
	ev.evals++
	m := ev.valid - 1
	if at >= 0 {
		m = min(m, at/ckEvery) // the callback must see gradient at
	}
	st := ev.work
	j0 := m * ckEvery
	if ev.preAt >= j0 && (at < 0 || ev.preAt <= at) {
		st.copyFrom(ev.pre)
		j0 = ev.preAt
	} else {
		st.copyFrom(ev.ck[m])
	}
	for j := j0; j < ev.in.n; j++ {
		if j == at && ev.preAt != at && at >= 0 {
			ev.pre.copyFrom(st)
			ev.preAt = at
		}
		if j%ckEvery == 0 && j/ckEvery == ev.valid {
			ev.ck[j/ckEvery].copyFrom(st)
			ev.valid = j/ckEvery + 1
		}
		if (j-j0)&3 == 1 && ev.lower(st, j) >= bound {
			ev.pruned++
			return math.Inf(1)
		}
		ev.in.step(st, j, ev.ps[j], nil)
		if j == at && cut(st) {
			ev.pruned++
			return math.Inf(1)
		}
	}
	return ev.in.total(st)
}
