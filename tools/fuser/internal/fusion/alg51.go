package fusion

import (
	"math"
	"slices"
	"time"
)

// Alg51Options tune Algorithm 5.1.
type Alg51Options struct {
	// NoPrune1 and NoPrune2 switch the prunings off (Table 5.1's ablation).
	NoPrune1, NoPrune2 bool
	// Seed, when set, is offered as the first incumbent (the thesis
	// bootstraps with a good heuristic plan, such as the best baseline).
	Seed []Group
	// MaxNodes and Deadline bound the search (0: unbounded); when either
	// runs out the best plan so far is returned with Complete false.
	MaxNodes int64
	Deadline time.Time
	// OnPrune, when set, is called at every cut (tests use it to check
	// that nothing better was cut): kind 1 with the prefix, its state and
	// the first group k..i whose subtree was cut; kind 2 for each skipped
	// end i < j*.
	OnPrune func(kind int, prefix []Group, k, i int, incumbent float64)
}

type alg51 struct {
	p        *Problem
	o        Alg51Options
	best     []Group
	bestT    float64
	st       Stats
	stopped  bool
	deadline bool
}

// Alg51 runs Cupcake's Algorithm 5.1 (thesis listing lines 59–96) with the
// fixes of specs/seed-cupcake-gemini.md A.5: empty ranges cost nothing, the
// base case returns no groups, the bound includes A, local and global
// bests are compared with the shared tie-break, and fuse-all is evaluated.
// Its prunings are sound only for subadditive costs (Problem.Subadditive);
// on others it may miss the optimum. complete is false when a budget ran
// out.
func Alg51(p *Problem, o Alg51Options) (groups []Group, t float64, st Stats, complete bool) {
	a := &alg51{p: p, o: o, bestT: math.Inf(1), deadline: !o.Deadline.IsZero()}
	n := p.N()
	if o.Seed != nil {
		a.offer(o.Seed)
	}
	for k := 1; k <= n && !a.stopped; k++ {
		m := []Group{{0, k - 1}}
		s := p.next(state{}, 0, k-1)
		if k == n {
			a.offer(m)
			continue
		}
		a.find(m, s, k)
	}
	return a.best, a.bestT, a.st, !a.stopped
}

// offer makes plan the incumbent if it is better.
func (a *alg51) offer(plan []Group) float64 {
	t := a.p.Time(plan)
	if a.best == nil || Better(t, plan, a.bestT, a.best) {
		a.best, a.bestT = slices.Clone(plan), t
	}
	return t
}

func (a *alg51) budget() bool {
	if a.stopped {
		return true
	}
	if a.o.MaxNodes > 0 && a.st.Nodes >= a.o.MaxNodes {
		a.stopped = true
	}
	if a.deadline && a.st.Nodes%1024 == 0 && time.Now().After(a.o.Deadline) {
		a.stopped = true
	}
	return a.stopped
}

// find is FindOptFusion(M, k): the best grouping of tensors k..N−1 after
// the prefix m (whose timeline state is s). It returns that grouping.
func (a *alg51) find(m []Group, s state, k int) []Group {
	p, n := a.p, a.p.N()
	a.st.Nodes++
	if k == n {
		return nil
	}
	local := []Group{{k, n - 1}}
	localT := a.offer(append(m, local...))
	if a.budget() {
		return local
	}
	delay := s.e - s.c // M.delay; s.c is M.comp
	js := k
	if !a.o.NoPrune2 {
		for i := k; i < n; i++ {
			if p.Bsum(k, i)+p.h(k, i) <= delay {
				js = i
			} else {
				break
			}
		}
		if a.o.OnPrune != nil {
			for i := k; i < js; i++ {
				a.o.OnPrune(2, m, k, i, a.bestT)
			}
		}
		a.st.Prune2 += int64(js - k)
	}
	for i := js; i < n; i++ {
		if !a.o.NoPrune1 {
			base := p.Bsum(k, n-1) + p.h(k, i) + p.h(i+1, n-1)
			cases := math.Max(p.Bsum(k, i)+p.h(k, i), delay) + p.g(k, i) + p.g(i+1, n-1)
			if bound := p.A + s.c + math.Max(base, cases); bound > a.bestT && !tie(bound, a.bestT) {
				a.st.Prune1++
				if a.o.OnPrune != nil {
					a.o.OnPrune(1, m, k, i, a.bestT)
				}
				continue
			}
		}
		first := Group{k, i}
		m2 := append(slices.Clip(m), first)
		rest := a.find(m2, p.next(s, k, i), i+1)
		cur := append([]Group{first}, rest...)
		curT := a.offer(append(slices.Clip(m), cur...))
		if Better(curT, cur, localT, local) {
			local, localT = cur, curT
		}
		if a.stopped {
			break
		}
	}
	return local
}
