package fusion

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/costmodel"
)

// randLinear draws an instance in one of four regimes (comm-bound,
// compute-bound, balanced, tiny costs), with α = 0 sometimes.
func randLinear(rng *rand.Rand, n int) *Problem {
	size := make([]float64, n)
	b := make([]float64, n)
	for i := range size {
		size[i] = math.Exp(rng.Float64()*8 - 3) // 0.05 .. 150 MB
		b[i] = rng.Float64() * 4
	}
	scale := [4]float64{4, 0.05, 0.5, 0.001}[rng.IntN(4)]
	alpha := func() float64 {
		if rng.IntN(5) == 0 {
			return 0
		}
		return rng.Float64() * 2 * scale
	}
	g := costmodel.Linear{Alpha: alpha(), Beta: rng.Float64() * scale}
	h := costmodel.Linear{Alpha: alpha(), Beta: rng.Float64() * 0.1 * scale}
	p, err := NewProblem(rng.Float64()*10, size, b, g, h)
	if err != nil {
		panic(err)
	}
	return p
}

// randPiecewise draws the non-subadditive instances of D.3: h constant
// below a threshold, sizes mixing tiny and large tensors.
func randPiecewise(rng *rand.Rand, n int) *Problem {
	size := make([]float64, n)
	b := make([]float64, n)
	for i := range size {
		if rng.IntN(2) == 0 {
			size[i] = 0.001 + rng.Float64()*0.299
		} else {
			size[i] = 0.5 + rng.Float64()*39.5
		}
		b[i] = 0.01 + rng.Float64()*3.99
	}
	g := costmodel.Linear{Alpha: rng.Float64(), Beta: rng.Float64() * 0.5}
	h := costmodel.Piecewise{Alpha: rng.Float64() * 2, Beta: rng.Float64() * 0.1, Threshold: rng.Float64() * 8}
	p, err := NewProblem(rng.Float64()*10, size, b, g, h)
	if err != nil {
		panic(err)
	}
	return p
}

func checkPlan(t *testing.T, p *Problem, groups []Group, tt float64, what string) {
	t.Helper()
	require.NoError(t, Check(groups, p.N()), what)
	require.InDelta(t, p.Time(groups), tt, 1e-9*math.Max(1, tt), what)
}

// F-T3: alg51 == pareto == brute on ≥ 10,000 random linear instances, and
// the reported plans are the same plan (shared tie-break).
func TestLinearAllAlgorithmsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(51, 1))
	cases := 10000
	if testing.Short() {
		cases = 1000
	}
	for c := range cases {
		n := 1 + rng.IntN(12)
		if c%50 == 0 {
			n = 13 + rng.IntN(4) // a few up to 16
		}
		p := randLinear(rng, n)
		bg, bt, _ := Brute(p)
		pg, pt, _ := Pareto(p)
		ag, at, _, complete := Alg51(p, Alg51Options{})
		require.True(t, complete)
		checkPlan(t, p, bg, bt, "brute")
		checkPlan(t, p, pg, pt, "pareto")
		checkPlan(t, p, ag, at, "alg51")
		require.True(t, tie(bt, pt), "case %d: brute %g pareto %g", c, bt, pt)
		require.True(t, tie(bt, at), "case %d: brute %g alg51 %g", c, bt, at)
		require.Equal(t, bg, pg, "case %d: pareto plan differs from brute", c)
		r, err := Plan(p, AlgoAuto, Alg51Options{})
		require.NoError(t, err)
		require.Equal(t, bg, r.Groups, "case %d: auto plan differs from brute", c)
		r, err = Plan(p, AlgoAlg51, Alg51Options{})
		require.NoError(t, err)
		require.True(t, r.ProvenOptimal)
		require.Equal(t, bg, r.Groups, "case %d: alg51's reported plan differs from brute", c)
		// F-T2: never worse than a baseline.
		for _, b := range Baselines(p, []float64{0.5, 2, 8}, DefaultSplits) {
			require.LessOrEqual(t, r.Time, b.Time*(1+relTol), "case %d: %s", c, b.Label())
		}
	}
}

// F-T4: on piecewise (non-subadditive) costs pareto == brute always, auto
// picks pareto, and alg51's prunings do go wrong (so it must not be used).
func TestPiecewiseParetoExactAlg51Unsound(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	wrong := 0
	for c := range 2000 {
		p := randPiecewise(rng, 2+rng.IntN(11))
		bg, bt, _ := Brute(p)
		pg, pt, _ := Pareto(p)
		require.True(t, tie(bt, pt), "case %d", c)
		require.Equal(t, bg, pg, "case %d", c)
		r, err := Plan(p, AlgoAuto, Alg51Options{})
		require.NoError(t, err)
		require.Equal(t, AlgoPareto, r.Algo)
		require.True(t, r.ProvenOptimal)
		_, at, _, _ := Alg51(p, Alg51Options{})
		if !tie(at, bt) {
			require.Greater(t, at, bt)
			wrong++
			f, err := Plan(p, AlgoAlg51, Alg51Options{})
			require.NoError(t, err)
			require.False(t, f.ProvenOptimal, "alg51 forced on non-subadditive costs must not claim optimality")
		}
	}
	// D.3 reports ≈ 6–7 % wrong with its cost ranges; these ranges give
	// fewer (6 of 2,000), but the failure must be real.
	require.Greater(t, wrong, 0, "expected alg51 to miss the optimum on some piecewise instances")
}

// The regression case of F-T4, pinned: an instance where prune 1 or prune
// 2 cuts the optimal plan.
func TestAlg51RegressionPiecewise(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for {
		p := randPiecewise(rng, 2+rng.IntN(11))
		_, bt, _ := Brute(p)
		_, at, _, _ := Alg51(p, Alg51Options{})
		if tie(at, bt) {
			continue
		}
		_, a1, _, _ := Alg51(p, Alg51Options{NoPrune1: true, NoPrune2: true})
		require.True(t, tie(a1, bt), "without prunings alg51 is exhaustive and exact")
		return
	}
}

// F-T6: timeline invariants and the identity f − A − ΣB − Σh − Σg + P = 0.
func TestTimelineInvariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	for range 500 {
		p := randLinear(rng, 1+rng.IntN(20))
		for _, groups := range [][]Group{LayerWise(p.N()), FuseAll(p.N()), EvenSplit(p.N(), 3)} {
			f, steps := p.Eval(groups)
			var sumB, sumH, sumG, P float64
			prevCompEnd, prevCommEnd := 0.0, 0.0
			for _, s := range steps {
				gb := p.Bsum(s.First, s.Last)
				require.InDelta(t, prevCompEnd+gb, s.BPEnd, 1e-9, "compute stream has no gaps")
				require.GreaterOrEqual(t, s.CommStart, s.CompEnd-1e-12)
				require.GreaterOrEqual(t, s.CommStart, prevCommEnd-1e-12)
				sumB += gb
				sumH += s.CompEnd - s.BPEnd
				sumG += s.CommEnd - s.CommStart
				prevCompEnd, prevCommEnd = s.CompEnd, s.CommEnd
			}
			for _, s := range steps { // overlap of communication with the busy compute stream [0, c]
				P += math.Max(0, math.Min(s.CommEnd, prevCompEnd)-s.CommStart)
			}
			require.InDelta(t, 0, f-p.A-sumB-sumH-sumG+P, 1e-9*math.Max(1, f))
		}
	}
}

// bestCompletion is the best time of any plan that starts with prefix.
func bestCompletion(p *Problem, prefix []Group) float64 {
	n := p.N()
	start := prefix[len(prefix)-1].Last + 1
	if start == n {
		return p.Time(prefix)
	}
	best := math.Inf(1)
	rest := n - start
	for mask := 0; mask < 1<<(rest-1); mask++ {
		g := append([]Group{}, prefix...)
		first := start
		for i := 0; i < rest-1; i++ {
			if mask>>i&1 == 1 {
				g = append(g, Group{first, start + i})
				first = start + i + 1
			}
		}
		g = append(g, Group{first, n - 1})
		best = math.Min(best, p.Time(g))
	}
	return best
}

// F-T8: every prune-1 cut on subadditive costs discards only subtrees no
// better than the incumbent at the time of the cut.
func TestPrune1Sound(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	cuts := 0
	for range 300 {
		p := randLinear(rng, 2+rng.IntN(9))
		Alg51(p, Alg51Options{OnPrune: func(kind int, prefix []Group, k, i int, incumbent float64) {
			if kind != 1 {
				return
			}
			cuts++
			got := bestCompletion(p, append(append([]Group{}, prefix...), Group{k, i}))
			require.GreaterOrEqual(t, got, incumbent*(1-relTol), "prune 1 cut a better plan")
		}})
	}
	require.Greater(t, cuts, 100)
}

func TestBaselineShapes(t *testing.T) {
	require.Equal(t, []Group{{0, 2}, {3, 5}, {6, 7}, {8, 9}}, EvenSplit(10, 4))
	require.Equal(t, []Group{{0, 0}, {1, 1}}, EvenSplit(2, 32))
	p, err := NewProblem(0, []float64{3, 3, 3, 1, 5}, make([]float64, 5), costmodel.Linear{}, costmodel.Linear{})
	require.NoError(t, err)
	require.Equal(t, []Group{{0, 1}, {2, 4}}, Buckets(p, 6))
	require.Equal(t, []Group{{0, 4}}, Buckets(p, 100))
}

func TestBadProblems(t *testing.T) {
	lin := costmodel.Linear{Alpha: 1, Beta: 1}
	for name, f := range map[string]func() error{
		"no gradients": func() error { _, err := NewProblem(0, nil, nil, lin, lin); return err },
		"zero size":    func() error { _, err := NewProblem(0, []float64{0}, []float64{1}, lin, lin); return err },
		"NaN time":     func() error { _, err := NewProblem(0, []float64{1}, []float64{math.NaN()}, lin, lin); return err },
		"negative A":   func() error { _, err := NewProblem(-1, []float64{1}, []float64{1}, lin, lin); return err },
		"bad cost": func() error {
			_, err := NewProblem(0, []float64{1}, []float64{1}, costmodel.Linear{Alpha: -5}, lin)
			return err
		},
	} {
		require.ErrorIs(t, f(), ErrProblem, name)
	}
	p, _ := NewProblem(0, make([]float64, 30), make([]float64, 30), lin, lin)
	_ = p
	big := make([]float64, 30)
	for i := range big {
		big[i] = 1
	}
	q, err := NewProblem(0, big, big, lin, lin)
	require.NoError(t, err)
	_, err = Plan(q, AlgoBrute, Alg51Options{})
	require.ErrorContains(t, err, "brute force")
}

func TestBudgetReturnsBestSoFar(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	p := randLinear(rng, 40)
	r, err := Plan(p, AlgoAlg51, Alg51Options{MaxNodes: 5, Seed: EvenSplit(p.N(), 2)})
	require.NoError(t, err)
	require.False(t, r.ProvenOptimal)
	require.NoError(t, Check(r.Groups, p.N()))
}

// The O(N³) linear-cost path and the general frontier search return the
// same plan, and the linear path never needs its fallback.
func TestParetoLinearMatchesFrontier(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for c := range 2000 {
		p := randLinear(rng, 1+rng.IntN(30))
		lg, lt, _, ok := paretoLinear(p, p.H.(costmodel.Linear))
		require.True(t, ok, "case %d: linear path fell back", c)
		fg, ft, _ := paretoFrontier(p)
		require.True(t, tie(lt, ft), "case %d: %g vs %g", c, lt, ft)
		require.Equal(t, fg, lg, "case %d", c)
	}
}

// F-T8 for prune 2: a first group k..i skipped because i < j* is no better
// than the group k..j*: the best completion of the skipped branch is no
// better than that of the j* branch.
func TestPrune2Sound(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	skips := 0
	for range 300 {
		p := randLinear(rng, 2+rng.IntN(9))
		Alg51(p, Alg51Options{OnPrune: func(kind int, prefix []Group, k, i int, _ float64) {
			if kind != 2 {
				return
			}
			skips++
			var s state
			for _, g := range prefix {
				s = p.next(s, g.First, g.Last)
			}
			js := k
			for j := k; j < p.N(); j++ {
				if p.Bsum(k, j)+p.h(k, j) <= s.e-s.c {
					js = j
				} else {
					break
				}
			}
			skipped := bestCompletion(p, append(append([]Group{}, prefix...), Group{k, i}))
			kept := bestCompletion(p, append(append([]Group{}, prefix...), Group{k, js}))
			require.GreaterOrEqual(t, skipped, kept*(1-relTol), "prune 2 skipped a better first group")
		}})
	}
	require.Greater(t, skips, 20)
}

// F-T7 (a heuristic, so checked empirically, not assumed): raising the
// compression launch cost α_h should not increase the optimal number of
// groups. It does not hold in general: a larger α_h moves the compute
// stream later, which can make a further split free where it was not. The
// test pins that counterexamples exist and that they are rare.
func TestLaunchCostGroupsMonotoneHeuristic(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	const cases = 1000
	violations := 0
	for range cases {
		p := randLinear(rng, 1+rng.IntN(14))
		h := p.H.(costmodel.Linear)
		prev := math.MaxInt
		for _, scale := range []float64{0, 0.5, 1, 2, 4, 16} {
			q, err := NewProblem(p.A, p.Size, p.B, p.G, costmodel.Linear{Alpha: h.Alpha*scale + 1e-3*scale, Beta: h.Beta})
			require.NoError(t, err)
			g, _, _ := Pareto(q)
			if len(g) > prev {
				violations++
				break
			}
			prev = len(g)
		}
	}
	t.Logf("α_h monotonicity violated in %d of %d instances", violations, cases)
	require.Greater(t, violations, 0, "the counterexample is gone: F-T7 may hold after all")
	require.Less(t, violations, cases/10)
}
