package espresso

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"
)

// Options tune the planner.
type Options struct {
	// Threshold is the size, in elements, from which the threshold
	// baseline compresses (the artifact's 16K; 0 means 16384).
	Threshold int64
	// NoCPU skips Algorithm 2 (no offloading to CPUs).
	NoCPU bool
	// OffloadCap bounds Algorithm 2's exhaustive search of Π(|G_i|+1)
	// strategies (0 means 1,000,000); above it, coordinate descent over
	// the u_i.
	OffloadCap int
	// NoBootstrap keeps Algorithm 1's paper start only (every gradient
	// uncompressed); by default it is also run from the best baseline when
	// that is better, so the plan is never worse than a baseline.
	NoBootstrap bool
	// NoDominance prices every candidate to the end; by default Algorithm 1
	// drops a candidate as soon as the timeline right after its gradient
	// is no earlier anywhere than with the current option (see dominates).
	NoDominance bool
}

// Baseline is a reference strategy and its predicted time.
type Baseline struct {
	// Name is none (no compression), all (compress every gradient) or
	// threshold (compress gradients of at least Threshold elements).
	Name     string
	Label    string
	Strategy []Option
	F        float64
}

// Decision says what Algorithm 1 and 2 did with one gradient.
type Decision struct {
	// Visited: Algorithm 1 priced its options; Removed (before its visit)
	// when it was uncompressed and communicated before the bubble at
	// gradient Bubble.
	Visited, Removed bool
	Bubble           int
	// Order is its place in Algorithm 1's visiting order (size descending,
	// latest-ready first among equal sizes).
	Order int
	// Before is F with its current option when visited, After with the
	// chosen one; Alternatives the number of options priced (candidates
	// available on the GPU), Pruned how many the lower bound discarded.
	Before, After        float64
	Alternatives, Pruned int
	// RunnerUp is the best option not chosen and its F (+Inf when every
	// other candidate was pruned).
	RunnerUp  Option
	RunnerUpF float64
	// Offloaded: Algorithm 2 moved its compression to the CPU.
	Offloaded bool
	// Group is its (size, option) group in Algorithm 2 (-1 when not a
	// candidate), Rank its place among the group's gradients (earliest
	// ready first), Offload how many of the group went to the CPU.
	Group, Rank, GroupSize, Offload int
}

// Result is a plan.
type Result struct {
	Strategy []Option
	F        float64
	// Start is F of the paper's starting point, AfterGPU after Algorithm 1,
	// Free F of the plan with free compression (its Upper Bound).
	Start, AfterGPU, Free float64
	Baselines             []Baseline
	Decisions             []Decision
	// Bootstrapped: Algorithm 1 was also run from the best baseline and
	// that run was kept.
	Bootstrapped bool
	// Evaluations of F (each possibly cut short), Pruned of them by the
	// lower bound.
	Evaluations, Pruned int
	// OffloadCandidates is |T_gpu|, OffloadGroups the number of (size,
	// option) groups, OffloadPoints Π(|G_i|+1) (saturating above 2^40),
	// OffloadExhaustive whether all were enumerated (else coordinate
	// descent).
	OffloadCandidates, OffloadGroups, OffloadPoints int
	OffloadExhaustive                               bool
	Wall                                            time.Duration
}

// gpuOptions are the candidates of Algorithm 1: every path with its
// Comp/Decomp on the GPU.
func (in *Instance) gpuOptions() []Option {
	out := make([]Option, len(in.Tree.Paths))
	for i := range out {
		out[i] = Option{Path: i}
	}
	return out
}

// cpuOf is option o with every Comp/Decomp on the CPU.
func (in *Instance) cpuOf(o Option) Option {
	return Option{Path: o.Path, CPU: 1<<in.Tree.Paths[o.Path].Ops() - 1}
}

func (in *Instance) compresses(o Option) bool { return in.Tree.Paths[o.Path].Comps > 0 }

// bestUniform is the best strategy giving every gradient (or those where
// pick is true) the same option from opts, the others base; ties keep
// the earlier option. Strategies that cannot beat the best so far are cut
// short by the evaluator's lower bound.
func (in *Instance) bestUniform(opts []Option, pick func(i int) bool, base []Option) ([]Option, Option, float64, bool) {
	bestF := math.Inf(1)
	var bestO Option
	found := false
	var ev *evaluator
	ps := make([]*prog, in.n)
	for _, o := range opts {
		ok := true
		for i := range ps {
			oi := o
			if !pick(i) {
				oi = base[i]
			}
			p, err := in.prog(i, oi, false)
			if err != nil {
				ok = false
				break
			}
			ps[i] = p
		}
		if !ok {
			continue
		}
		if ev == nil {
			ev = newEvaluator(in, ps)
		} else {
			for i, p := range ps {
				ev.set(i, p)
			}
			ev.refresh()
		}
		if f := ev.eval(bestF); f < bestF {
			bestF, bestO, found = f, o, true
		}
	}
	if !found {
		return nil, Option{}, 0, false
	}
	s := make([]Option, in.n)
	for i := range s {
		if pick(i) {
			s[i] = bestO
		} else {
			s[i] = base[i]
		}
	}
	return s, bestO, bestF, true
}

// Baselines computes the reference strategies: no compression (the best
// uncompressed option, the same for every gradient), compress everything
// (the best compressing GPU option for all), and the artifact's size
// threshold (gradients of at least threshold elements get the best
// compressing option, the others stay uncompressed).
func (in *Instance) Baselines(threshold int64) ([]Baseline, error) {
	if threshold <= 0 {
		threshold = 16384
	}
	var plain, comp []Option
	for _, o := range in.gpuOptions() {
		if in.compresses(o) {
			comp = append(comp, o)
		} else {
			plain = append(plain, o)
		}
	}
	all := func(int) bool { return true }
	none, noneO, noneF, ok := in.bestUniform(plain, all, nil)
	if !ok {
		return nil, fmt.Errorf("%w: no uncompressed option is available", ErrInput)
	}
	out := []Baseline{{Name: "none", Label: "no compression: " + in.Tree.Format(noneO), Strategy: none, F: noneF}}
	if s, o, f, ok := in.bestUniform(comp, all, none); ok {
		out = append(out, Baseline{Name: "all", Label: "compress everything: " + in.Tree.Format(o), Strategy: s, F: f})
	}
	big := func(i int) bool { return in.Job.Grads[i].Numel >= threshold }
	if s, o, f, ok := in.bestUniform(comp, big, none); ok {
		out = append(out, Baseline{Name: "threshold", Label: fmt.Sprintf("compress >= %d elements: %s", threshold, in.Tree.Format(o)),
			Strategy: s, F: f})
	}
	return out, nil
}

// Plan runs Espresso: Algorithm 1 from no compression (and, unless
// NoBootstrap, from the best baseline when that is better), then
// Algorithm 2.
func (in *Instance) Plan(o Options) (*Result, error) {
	t0 := time.Now()
	bl, err := in.Baselines(o.Threshold)
	if err != nil {
		return nil, err
	}
	r := &Result{Baselines: bl, Start: bl[0].F}
	best := bl[0]
	for _, b := range bl[1:] {
		if b.F < best.F {
			best = b
		}
	}
	// Algorithm 1 from no compression (the paper's start) and, at the same
	// time on another core, from the best baseline; the better is kept
	// (the paper's on a tie), so the plan is never worse than a baseline.
	in.precompile()
	var s, s2 []Option
	var dec, dec2 []Decision
	var err2 error
	r2 := &Result{}
	var wg sync.WaitGroup
	if !o.NoBootstrap && best.Name != "none" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s2, dec2, err2 = in.alg1(best.Strategy, r2, o)
		}()
	}
	s, dec, err = in.alg1(bl[0].Strategy, r, o)
	wg.Wait()
	if err == nil {
		err = err2
	}
	if err != nil {
		return nil, err
	}
	f, _ := in.F(s)
	r.Evaluations += r2.Evaluations
	r.Pruned += r2.Pruned
	if s2 != nil {
		if f2, _ := in.F(s2); f2 < f {
			s, dec, f, r.Bootstrapped = s2, dec2, f2, true
		}
	}
	r.AfterGPU = f
	r.Decisions = dec
	if !o.NoCPU && in.Costs.CPU != nil {
		s, f, err = in.alg2(s, f, o.OffloadCap, r)
		if err != nil {
			return nil, err
		}
	}
	r.Strategy, r.F = s, f
	if r.Free, err = in.FreeCompression(s); err != nil {
		return nil, err
	}
	r.Wall = time.Since(t0)
	return r, nil
}

// VisitOrder is Algorithm 1's order (lines 2–3): size descending, and
// among equal sizes the gradient closest to the output layer — the one
// ready LATEST in backprop (spec §0.1) — first.
func (in *Instance) VisitOrder() []int {
	ord := make([]int, in.n)
	for i := range ord {
		ord[i] = i
	}
	slices.SortStableFunc(ord, func(a, b int) int {
		if c := cmp.Compare(in.Job.Grads[b].Numel, in.Job.Grads[a].Numel); c != 0 {
			return c
		}
		return cmp.Compare(b, a)
	})
	return ord
}

// alg1 is Algorithm 1 from strategy start.
func (in *Instance) alg1(start []Option, r *Result, o Options) ([]Option, []Decision, error) {
	s := slices.Clone(start)
	ps, err := in.progs(s, false)
	if err != nil {
		return nil, nil, err
	}
	a := &alg1Run{in: in, s: s, ev: newEvaluator(in, ps), o: o, dec: make([]Decision, in.n), removed: make([]bool, in.n),
		cands: in.gpuOptions(), front: make([]frontier, 6)}
	for i := range a.dec {
		a.dec[i].Group = -1
		a.dec[i].RunnerUpF = math.Inf(1)
	}
	for i := range a.front {
		a.front[i].st = in.newState()
	}
	a.remove()
	for k, idx := range in.VisitOrder() {
		a.visit(k, idx)
	}
	r.Evaluations += a.ev.evals
	r.Pruned += a.ev.pruned
	return s, a.dec, nil
}

// frontier is one of the few most promising candidates' states seen at a
// gradient, with its lower bound.
type frontier struct {
	st *state
	lb float64
}

// cand is a candidate option for one gradient that survived screening.
type cand struct {
	o     Option
	p     *prog
	lb    float64
	order int
}

// alg1Run is Algorithm 1's walk over the gradients: the strategy as it
// evolves, its evaluator, each gradient's decision, the gradients removed
// (before the last bubble, uncompressed) and the dominance frontier.
type alg1Run struct {
	in      *Instance
	s       []Option
	ev      *evaluator
	o       Options
	dec     []Decision
	removed []bool
	cands   []Option
	front   []frontier
	nFront  int
}

// remove drops from the search the uncompressed gradients before the
// strategy's last bubble.
func (a *alg1Run) remove() {
	b := a.in.lastBubble(a.ev.ps)
	for i := 0; i < b; i++ {
		if !a.removed[i] && !a.in.compresses(a.s[i]) {
			a.removed[i], a.dec[i].Removed, a.dec[i].Bubble = true, true, b
		}
	}
}

// visit decides gradient idx, the k-th of the visit order: screen the
// candidates, price the survivors, keep the least F.
func (a *alg1Run) visit(k, idx int) {
	d := &a.dec[idx]
	d.Order = k
	if a.removed[idx] {
		return
	}
	d.Visited = true
	cur, curP := a.s[idx], a.ev.ps[idx] // before screening sets other options' programs
	base := a.in.newState()
	a.ev.refresh() // the bounds' suffix sums, for the strategy as it now is
	best := a.ev.evalCut(math.Inf(1), idx, func(st *state) bool { base.copyFrom(st); return false })
	d.Before = best
	live := a.screen(idx, cur, base, d)
	bestO, bestP, best := a.price(idx, live, cur, curP, best, d)
	a.ev.set(idx, bestP)
	d.After = best
	if bestO != cur {
		a.s[idx] = bestO
		a.remove()
	}
}

// screen is phase 1: each candidate's timeline up to and including
// gradient idx only: drop those the current option (base) or a frontier
// state dominates, and rank the others by their lower bound, so that the
// likely best are priced first and the bound cuts the rest early.
func (a *alg1Run) screen(idx int, cur Option, base *state, d *Decision) []cand {
	var live []cand
	a.nFront = 0
	for k, c := range a.cands {
		if c == cur {
			continue
		}
		p, err := a.in.prog(idx, c, false)
		if err != nil {
			continue
		}
		d.Alternatives++
		a.ev.set(idx, p)
		dom, lb := false, 0.0
		a.ev.evalCut(math.Inf(1), idx, func(st *state) bool {
			lb = a.ev.lower(st, idx+1)
			if a.o.NoDominance {
				return true
			}
			dom = dominates(st, base)
			// or by one of the few most promising earlier candidates
			for _, f := range a.front[:a.nFront] {
				if dom {
					break
				}
				dom = dominates(st, f.st)
			}
			if !dom {
				a.keepFront(st, lb)
			}
			return true
		})
		if dom {
			d.Pruned++
			continue
		}
		live = append(live, cand{c, p, lb, k})
	}
	slices.SortStableFunc(live, func(x, y cand) int { return cmp.Compare(x.lb, y.lb) })
	return live
}

// keepFront keeps st among the frontier's lowest bounds, in bound order.
func (a *alg1Run) keepFront(st *state, lb float64) {
	k := a.nFront
	if k == len(a.front) {
		k = len(a.front) - 1
		if a.front[k].lb <= lb {
			return
		}
	} else {
		a.nFront++
	}
	a.front[k].st.copyFrom(st)
	a.front[k].lb = lb
	for k > 0 && a.front[k-1].lb > a.front[k].lb {
		a.front[k-1], a.front[k] = a.front[k], a.front[k-1]
		k--
	}
}

// price is phase 2: price the screened candidates to the end. The winner
// is the least F, ties going to the current option, then to the earlier
// option in the tree's order; a candidate is cut once its lower bound
// shows it cannot win.
func (a *alg1Run) price(idx int, live []cand, cur Option, curP *prog, best float64, d *Decision) (Option, *prog, float64) {
	bestO, bestP, bestOrder := cur, curP, -1
	for _, c := range live {
		if c.lb > best || (c.lb >= best && c.order > bestOrder) {
			d.Pruned++
			continue
		}
		bound := best
		if c.order < bestOrder {
			bound = math.Nextafter(best, math.Inf(1)) // an equal F would win
		}
		a.ev.set(idx, c.p)
		pr := a.ev.pruned
		f := a.ev.eval(bound)
		if a.ev.pruned > pr {
			d.Pruned++
		}
		switch {
		case f < best || (f == best && c.order < bestOrder):
			// the previous best becomes the runner-up
			d.RunnerUp, d.RunnerUpF = bestO, best
			best, bestO, bestP, bestOrder = f, c.o, c.p, c.order
		case f < d.RunnerUpF:
			d.RunnerUp, d.RunnerUpF = c.o, f
		}
	}
	return bestO, bestP, best
}

// alg2 is Algorithm 2: CPU offloading over (size, option) groups.
func (in *Instance) alg2(s []Option, f float64, capN int, r *Result) ([]Option, float64, error) {
	if capN <= 0 {
		capN = 1000000
	}
	groups := in.offloadGroups(s)
	points := 1
	for gi, g := range groups {
		r.OffloadCandidates += len(g.members)
		for k, i := range g.members {
			r.Decisions[i].Group, r.Decisions[i].Rank, r.Decisions[i].GroupSize = gi, k, len(g.members)
		}
		if points <= 1<<40 {
			points *= len(g.members) + 1
		}
	}
	r.OffloadGroups = len(groups)
	r.OffloadPoints = points
	if len(groups) == 0 {
		return s, f, nil
	}
	ps, err := in.progs(s, false)
	if err != nil {
		return nil, 0, err
	}
	var best []int
	bestF := f
	if points <= capN {
		r.OffloadExhaustive = true
		var evals, pruned int
		best, bestF, evals, pruned = in.offloadDFS(ps, groupsOf(groups), f)
		r.Evaluations += evals
		r.Pruned += pruned
	} else {
		sr := &offloadSearch{groups: groups, ev: newEvaluator(in, ps), u: make([]int, len(groups)), best: make([]int, len(groups)), bestF: f}
		sr.descend()
		r.Evaluations += sr.ev.evals
		r.Pruned += sr.ev.pruned
		bestF, best = sr.bestF, sr.best
	}
	if best == nil {
		best = make([]int, len(groups))
	}
	out := slices.Clone(s)
	for gi, g := range groups {
		for k, i := range g.members {
			r.Decisions[i].Offload = best[gi]
			if k < best[gi] {
				out[i] = in.cpuOf(s[i])
				r.Decisions[i].Offloaded = true
			}
		}
	}
	return out, bestF, nil
}

// offloadGroups groups the gradients strategy s compresses on the GPU by
// (size, option), with each member's GPU and CPU programs. The
// enumeration's fastest digit is the group whose earliest member is
// readiest last, so that most steps re-simulate only a late suffix of the
// timeline.
func (in *Instance) offloadGroups(s []Option) []*offloadGroup {
	var groups []*offloadGroup
	byKey := map[[2]int64]*offloadGroup{}
	for i, o := range s {
		if !in.compresses(o) || o.CPU != 0 {
			continue
		}
		cp, err := in.prog(i, in.cpuOf(o), false)
		if err != nil {
			continue
		}
		key := [2]int64{in.Job.Grads[i].Numel, int64(o.Path)}
		g := byKey[key]
		if g == nil {
			g = &offloadGroup{}
			byKey[key] = g
			groups = append(groups, g)
		}
		gp, _ := in.prog(i, o, false)
		g.members = append(g.members, i)
		g.gpu = append(g.gpu, gp)
		g.cpu = append(g.cpu, cp)
	}
	slices.SortStableFunc(groups, func(a, b *offloadGroup) int { return cmp.Compare(b.members[0], a.members[0]) })
	return groups
}

// offloadSearch is Algorithm 2's coordinate descent when the groups'
// points are too many to enumerate: an evaluator and an assignment u
// (u_i = how many of group i's earliest-ready members run on the CPU),
// with the best seen.
type offloadSearch struct {
	groups []*offloadGroup
	ev     *evaluator
	u      []int
	best   []int
	bestF  float64
}

// setU puts group gi's v earliest-ready members on the CPU.
func (sr *offloadSearch) setU(gi, v int) {
	g := sr.groups[gi]
	for k, i := range g.members {
		if k < v {
			sr.ev.set(i, g.cpu[k])
		} else {
			sr.ev.set(i, g.gpu[k])
		}
	}
	sr.u[gi] = v
}

// try prices the current assignment and keeps it when it is the best.
func (sr *offloadSearch) try() {
	sr.ev.refresh()
	if v := sr.ev.eval(sr.bestF); v < sr.bestF {
		sr.bestF = v
		copy(sr.best, sr.u)
	}
}

// descend changes each u_i in turn, from the best assignment, until no
// change helps.
func (sr *offloadSearch) descend() {
	for improved := true; improved; {
		improved = false
		for gi, g := range sr.groups {
			for gi2 := range sr.u {
				sr.setU(gi2, sr.best[gi2])
			}
			for v := 0; v <= len(g.members); v++ {
				if v == sr.best[gi] {
					continue
				}
				sr.setU(gi, v)
				before := sr.bestF
				sr.try()
				if sr.bestF < before {
					improved = true
				}
			}
		}
	}
}

// precompile prices every path on the GPU for every size, so that the
// option cache is only read while Algorithm 1 runs on two goroutines.
func (in *Instance) precompile() {
	done := make([]bool, len(in.sizes))
	for i := range in.n {
		if done[in.class[i]] {
			continue
		}
		done[in.class[i]] = true
		for p := range in.Tree.Paths {
			_, _ = in.prog(i, Option{Path: p}, false)
		}
	}
}

// offloadGroup is one (size, option) group of Algorithm 2.
type offloadGroup struct {
	members []int // ascending ready index: the earliest are offloaded first (Lemma 1)
	gpu     []*prog
	cpu     []*prog
}

func groupsOf(g []*offloadGroup) []*offloadGroup { return g }

// offloadDFS is Algorithm 2's exhaustive search over the Π(|G_i|+1)
// earliest-ready-prefix assignments, walked depth-first in backprop
// order: at each candidate gradient the GPU branch first, then the CPU one
// when every earlier member of its group is on the CPU (a group's CPU
// members are always a prefix). Assignments sharing a prefix share its
// timeline, and a branch stops once a lower bound — what has ended, the
// backprop still to run, and each resource's free time plus the least
// time the remaining gradients can hold it — reaches the best F found.
// Only strict improvements count, so ties keep the first assignment in
// this order (all on the GPU first). It returns u (per group) and F.
func (in *Instance) offloadDFS(ps []*prog, groups []*offloadGroup, f float64) ([]int, float64, int, int) {
	n := in.n
	gOf := make([]int, n)
	rank := make([]int, n)
	cpuP := make([]*prog, n)
	for i := range gOf {
		gOf[i] = -1
	}
	for gi, g := range groups {
		for k, i := range g.members {
			gOf[i], rank[i], cpuP[i] = gi, k, g.cpu[k]
		}
	}
	// least remaining usage of every resource, and backprop, from j on
	var sufMin = make([][nRes]float64, n+1)
	sufC := make([]float64, n+1)
	for j := n - 1; j >= 0; j-- {
		sufMin[j], sufC[j] = sufMin[j+1], sufC[j+1]+in.compute[j]
		for r := range nRes {
			u := ps[j].usage[r]
			if cpuP[j] != nil {
				u = min(u, cpuP[j].usage[r])
			}
			sufMin[j][r] += u
		}
	}
	lower := func(st *state, j int) float64 {
		lb := fmax(st.maxEnd, st.bpEnd+sufC[j])
		u := &sufMin[j]
		for r := range resCPU {
			lb = fmax(lb, st.free[r]+u[r])
		}
		if u[resCPU] > 0 {
			m := st.cpu[0]
			for _, x := range st.cpu[1:] {
				m = min(m, x)
			}
			lb = fmax(lb, m+u[resCPU]/float64(len(st.cpu)))
		}
		return in.Job.ForwardNS + lb + in.Job.UpdateNS
	}
	cpuCount := make([]int, len(groups))
	closed := make([]bool, len(groups))
	best := make([]int, len(groups))
	bestF := f
	evals, pruned := 0, 0
	var stack []*state
	var walk func(st *state, j, depth int)
	walk = func(st *state, j, depth int) {
		for ; j < n; j++ {
			if lower(st, j) >= bestF {
				pruned++
				return
			}
			g := gOf[j]
			if g < 0 || closed[g] || cpuCount[g] != rank[j] {
				in.step(st, j, ps[j], nil)
				continue
			}
			// branch: the GPU (this and the rest of its group stay there),
			// then the CPU
			for len(stack) <= depth {
				stack = append(stack, in.newState())
			}
			saved := stack[depth]
			saved.copyFrom(st)
			closed[g] = true
			in.step(st, j, ps[j], nil)
			walk(st, j+1, depth+1)
			closed[g] = false
			st.copyFrom(saved)
			cpuCount[g]++
			in.step(st, j, cpuP[j], nil)
			walk(st, j+1, depth+1)
			cpuCount[g]--
			return
		}
		evals++
		if v := in.total(st); v < bestF {
			bestF = v
			copy(best, cpuCount)
		}
	}
	walk(in.newState(), 0, 0)
	return best, bestF, evals + pruned, pruned
}
