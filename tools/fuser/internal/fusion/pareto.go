package fusion

import (
	"cmp"
	"math"
	"slices"

	"trainwire.dev/lib/costmodel"
)

// node is a persistent list of groups (a plan prefix), newest first.
type node struct {
	g     Group
	prev  *node
	count int
}

func (n *node) groups() []Group {
	out := make([]Group, n.len())
	for i := len(out) - 1; n != nil; i, n = i-1, n.prev {
		out[i] = n.g
	}
	return out
}

func (n *node) len() int {
	if n == nil {
		return 0
	}
	return n.count
}

type cand struct {
	s      state
	parent *node
	first  int // the new group is first..k-1 where k is the frontier index
}

// Stats describes a search.
type Stats struct {
	// Nodes is the number of states expanded (Pareto: frontier states;
	// Alg. 5.1: FindOptFusion calls; brute force: plans evaluated).
	Nodes int64
	// Prune1 and Prune2 count Algorithm 5.1's cuts: branches cut by the
	// optimistic-outcome bound, and first-group ends skipped below j*.
	Prune1, Prune2 int64
	// MaxFrontier is the largest Pareto frontier.
	MaxFrontier int
}

// Pareto returns the optimal plan exactly, for any cost shape: for every
// prefix length it keeps the non-dominated (compute end, comm end) states
// (both transitions are monotone in both), so the answer is the best state
// at the end. Dominated states whose plan prefix the tie-break prefers are
// kept, so the result is the same plan brute force returns.
func Pareto(p *Problem) ([]Group, float64, Stats) {
	if h, ok := p.H.(costmodel.Linear); ok {
		if g, t, st, ok := paretoLinear(p, h); ok {
			return g, t, st
		}
	}
	return paretoFrontier(p)
}

// paretoFrontier is Pareto for any cost shape, in two passes. The first
// finds the optimal time with plain dominance (a small frontier). The
// second finds the plan the tie-break prefers among the optimal ones: it
// must keep dominated states whose prefix is preferred (they can still
// tie), which would blow the frontier up many times, so it keeps only
// states from which the optimum is still reachable (see reach).
func paretoFrontier(p *Problem) ([]Group, float64, Stats) {
	opt := plainOptimum(p)
	r := newReach(p, opt-p.A+relTol*math.Abs(opt))
	n := p.N()
	front := make([][]cand, n+1)
	front[0] = []cand{{}}
	kept := make([]*node, 0, 64)
	dom := newDominance(n)
	var st Stats
	var lastNodes []*node
	var lastStates []state
	for k := 0; k <= n; k++ {
		cs := front[k]
		front[k] = nil
		slices.SortFunc(cs, func(a, b cand) int {
			if c := cmp.Compare(a.s.c, b.s.c); c != 0 {
				return c
			}
			return cmp.Compare(a.s.e, b.s.e)
		})
		kept = kept[:0]
		var states []state
		dom.reset()
		for _, c := range cs {
			var nd *node
			if k > 0 {
				nd = &node{g: Group{c.first, k - 1}, prev: c.parent, count: c.parent.len() + 1}
			}
			if dom.dominated(c.s.e, nd) {
				continue
			}
			dom.add(c.s.e, nd)
			kept = append(kept, nd)
			states = append(states, c.s)
		}
		if len(states) > st.MaxFrontier {
			st.MaxFrontier = len(states)
		}
		st.Nodes += int64(len(states))
		if k == n {
			lastNodes, lastStates = kept, states
			break
		}
		for x, s := range states {
			for i := k; i < n; i++ {
				if ns := p.next(s, k, i); r.ok(i+1, ns) {
					front[i+1] = append(front[i+1], cand{s: ns, parent: kept[x], first: k})
				}
			}
		}
	}
	var best []Group
	bestT := 0.0
	for x, s := range lastStates {
		t := p.A + s.e
		g := lastNodes[x].groups()
		if best == nil || Better(t, g, bestT, best) {
			best, bestT = g, t
		}
	}
	return best, bestT, st
}

// Brute evaluates all 2^(N−1) plans; for N up to 24.
func Brute(p *Problem) ([]Group, float64, Stats) {
	n := p.N()
	var best []Group
	bestT := 0.0
	var st Stats
	groups := make([]Group, 0, n)
	for mask := uint64(0); mask < 1<<(n-1); mask++ {
		groups = groups[:0]
		first := 0
		for i := 0; i < n-1; i++ {
			if mask>>i&1 == 1 { // a cut after tensor i
				groups = append(groups, Group{first, i})
				first = i + 1
			}
		}
		groups = append(groups, Group{first, n - 1})
		t := p.Time(groups)
		st.Nodes++
		if best == nil || Better(t, groups, bestT, best) {
			best, bestT = slices.Clone(groups), t
		}
	}
	return best, bestT, st
}

// dominance answers, for candidates visited in increasing compute end c,
// whether an already kept state has a comm end no later (within the
// tie tolerance) and a plan prefix the tie-break prefers or ties: then the
// candidate can neither beat it nor win a tie against it. Fewer groups is
// preferred first, so kept states are indexed by group count: a Fenwick
// tree gives the smallest comm end among states with fewer groups, and a
// list per count settles equal counts by comparing group ends.
type dominance struct {
	fen     []float64 // prefix minimum of e over group counts, 1-based
	byCount [][]keptState
	touched []int
}

type keptState struct {
	e  float64
	nd *node
}

func newDominance(n int) *dominance {
	d := &dominance{fen: make([]float64, n+2), byCount: make([][]keptState, n+2)}
	for i := range d.fen {
		d.fen[i] = math.Inf(1)
	}
	return d
}

func (d *dominance) reset() {
	for _, y := range d.touched {
		d.byCount[y] = d.byCount[y][:0]
		for i := y + 1; i < len(d.fen); i += i & -i {
			d.fen[i] = math.Inf(1)
		}
	}
	d.touched = d.touched[:0]
}

// atMost returns e_ok: whether e' <= e within the tolerance.
func atMost(kept, e float64) bool { return kept <= e || tie(kept, e) }

func (d *dominance) dominated(e float64, nd *node) bool {
	y := nd.len()
	// Fewer groups: strictly preferred. Minimum e over counts 0..y-1.
	m := math.Inf(1)
	for i := y; i > 0; i -= i & -i {
		m = math.Min(m, d.fen[i])
	}
	if atMost(m, e) {
		return true
	}
	if len(d.byCount[y]) == 0 {
		return false
	}
	var mine []Group
	for _, ks := range d.byCount[y] {
		if atMost(ks.e, e) {
			if mine == nil {
				mine = nd.groups()
			}
			if prefer(ks.nd.groups(), mine) <= 0 {
				return true
			}
		}
	}
	return false
}

func (d *dominance) add(e float64, nd *node) {
	y := nd.len()
	if len(d.byCount[y]) == 0 {
		d.touched = append(d.touched, y)
	}
	d.byCount[y] = append(d.byCount[y], keptState{e, nd})
	for i := y + 1; i < len(d.fen); i += i & -i {
		d.fen[i] = math.Min(d.fen[i], e)
	}
}

// plainOptimum is the optimal iteration time, by the Pareto frontier of
// (compute end, comm end) with plain dominance.
func plainOptimum(p *Problem) float64 {
	n := p.N()
	front := make([][]state, n+1)
	front[0] = []state{{}}
	for k := 0; k < n; k++ {
		kept := frontierOf(front[k])
		front[k] = nil
		for _, s := range kept {
			for i := k; i < n; i++ {
				front[i+1] = append(front[i+1], p.next(s, k, i))
			}
		}
	}
	best := math.Inf(1)
	for _, s := range front[n] {
		best = math.Min(best, s.e)
	}
	return p.A + best
}

// frontierOf sorts states by compute end and keeps those with a strictly
// smaller comm end than every state before them.
func frontierOf(cs []state) []state {
	slices.SortFunc(cs, func(a, b state) int {
		if c := cmp.Compare(a.c, b.c); c != 0 {
			return c
		}
		return cmp.Compare(a.e, b.e)
	})
	kept := cs[:0]
	for _, s := range cs {
		if len(kept) == 0 || s.e < kept[len(kept)-1].e {
			kept = append(kept, s)
		}
	}
	return kept
}

// reach answers exactly whether a state (c, e) after tensors 0..k−1 can
// still finish with a comm end within bound. Any grouping of tensors
// k..N−1 ends its comm stream at max(e + G, c + M), where for a first
// group of compute a = B + h and comm g followed by the rest (M', G'):
// G = g + G' and M = a + max(g + G', M'). So per k the Pareto-minimal
// (M, G) pairs decide it: some pair has c + M <= bound and e + G <= bound.
type reach struct {
	bound float64
	mg    [][]state // per k: (M, G) pairs stored as (c, e), sorted by M
}

func newReach(p *Problem, bound float64) *reach {
	n := p.N()
	r := &reach{bound: bound, mg: make([][]state, n+1)}
	r.mg[n] = []state{{c: math.Inf(-1), e: 0}}
	for k := n - 1; k >= 0; k-- {
		var cs []state
		for i := k; i < n; i++ {
			a := p.Bsum(k, i) + p.h(k, i)
			g := p.g(k, i)
			for _, rest := range r.mg[i+1] {
				cs = append(cs, state{c: a + math.Max(g+rest.e, rest.c), e: g + rest.e})
			}
		}
		r.mg[k] = slices.Clone(frontierOf(cs))
	}
	return r
}

// ok reports whether s, after tensors 0..k−1, can still meet the bound
// (with a rounding margin: pruning a reachable state would lose the plan).
func (r *reach) ok(k int, s state) bool {
	b := r.bound + 1e-12*math.Max(1, math.Abs(r.bound))
	for _, x := range r.mg[k] {
		if s.c+x.c <= b && s.e+x.e <= b {
			return true
		}
	}
	return false
}
