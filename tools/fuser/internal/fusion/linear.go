package fusion

import (
	"math"

	"trainwire.dev/lib/costmodel"
)

// paretoLinear is the exact search when compression cost is linear: then
// the compute-stream end after k tensors in y groups is
// B(0,k−1) + y·α_h + β_h·S(0,k−1) whatever the grouping, so the Pareto
// frontier of cell (k, y) is one point, its least comm end E[k][y]:
//
//	E[k][y] = min over j < k of max(c(k,y), E[j][y−1]) + g(j, k−1)
//
// O(N³). The optimum is A + min over y of E[N][y]. The canonical plan
// (fewest groups, then smallest ends) comes from a backward pass giving,
// per cell, the latest comm end from which the optimum is still reachable,
// and a forward pass taking the smallest feasible end at every step.
func paretoLinear(p *Problem, h costmodel.Linear) ([]Group, float64, Stats, bool) {
	n := p.N()
	inf := math.Inf(1)
	c := func(k, y int) float64 { return p.Bsum(0, k-1) + float64(y)*h.Alpha + h.Beta*p.Bytes(0, k-1) }
	E := make([][]float64, n+1)
	for k := range E {
		E[k] = make([]float64, n+1)
		for y := range E[k] {
			E[k][y] = inf
		}
	}
	E[0][0] = 0
	var st Stats
	for k := 1; k <= n; k++ {
		for y := 1; y <= k; y++ {
			ck := c(k, y)
			best := inf
			for j := y - 1; j < k; j++ {
				if e := E[j][y-1]; e < inf {
					best = math.Min(best, math.Max(ck, e)+p.g(j, k-1))
				}
			}
			E[k][y] = best
			st.Nodes++
		}
	}
	opt := inf
	for y := 1; y <= n; y++ {
		opt = math.Min(opt, p.A+E[n][y])
	}
	ys := 0
	for y := 1; y <= n; y++ {
		if t := p.A + E[n][y]; t <= opt || tie(t, opt) {
			ys = y
			break
		}
	}
	// Backward: Th[k][y] is the latest comm end at cell (k, y) from which
	// ys groups in all can still finish within the tie of opt.
	bound := opt - p.A + relTol*math.Abs(opt)
	slack := func(x float64) float64 { return x + 1e-12*math.Max(1, math.Abs(x)) }
	Th := make([][]float64, n+1)
	for k := range Th {
		Th[k] = make([]float64, ys+1)
		for y := range Th[k] {
			Th[k][y] = -inf
		}
	}
	Th[n][ys] = bound
	for y := ys - 1; y >= 0; y-- {
		for k := n - 1; k >= y; k-- {
			for i := k; i < n; i++ {
				if (i+1 == n) != (y+1 == ys) || Th[i+1][y+1] == -inf {
					continue
				}
				g := p.g(k, i)
				if c(i+1, y+1)+g <= slack(Th[i+1][y+1]) {
					Th[k][y] = math.Max(Th[k][y], Th[i+1][y+1]-g)
				}
			}
		}
	}
	var groups []Group
	k, e := 0, 0.0
	for y := 0; k < n; y++ {
		next := -1
		for i := k; i < n && next < 0; i++ {
			if (i+1 == n) != (y+1 == ys) || Th[i+1][y+1] == -inf {
				continue
			}
			g := p.g(k, i)
			if math.Max(c(i+1, y+1), e)+g <= slack(Th[i+1][y+1]) {
				next = i
			}
		}
		if next < 0 {
			return nil, 0, st, false // rounding defeated the backward pass
		}
		e = math.Max(c(next+1, y+1), e) + p.g(k, next)
		groups = append(groups, Group{k, next})
		k = next + 1
	}
	t := p.Time(groups)
	if !tie(t, opt) && t > opt {
		return nil, 0, st, false
	}
	st.MaxFrontier = 1
	return groups, t, st, true
}
