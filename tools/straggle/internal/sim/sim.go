// Package sim is straggle's what-if simulator (seed-straggle.md §5.5): the
// fresh-start probe microbenchmark (Model A), the continuous non-blocking
// RNA loop (Model B), the toy convergence run on f(x) = ½‖x‖², and the
// power-of-d waiting-time bound of §1.6. Every function is deterministic
// given its seed.
package sim

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Dur draws the duration (ms) of one iteration of worker i.
type Dur func(i int, rng *rand.Rand) float64

// Mode is a synchronisation policy of the simulator.
type Mode string

// Modes: bsp waits for everyone; rna probes Q workers (Q=1 is eager-SGD's
// random initiator); solo triggers on the first ready worker.
const (
	BSP  Mode = "bsp"
	RNA  Mode = "rna"
	Solo Mode = "solo"
)

func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// Pct returns the p-th percentile of xs by the nearest-rank rule the
// reference script uses.
func Pct(xs []float64, p float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Round(p / 100 * float64(len(s)-1)))
	i = min(len(s)-1, max(0, i))
	return s[i]
}

func mean(xs []float64) float64 {
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// Summary is a distribution's mean and percentiles.
type Summary struct {
	P5, P25, P50, P75, P95, Mean float64
}

// Summarize computes a Summary.
func Summarize(xs []float64) Summary {
	return Summary{Pct(xs, 5), Pct(xs, 25), Pct(xs, 50), Pct(xs, 75), Pct(xs, 95), mean(xs)}
}

// ModelA is the fresh-start microbenchmark of the thesis's §5.6.4: every
// round each of n nodes draws U(lo, hi); the round lasts the minimum over
// q random probes plus q·probeCost (bsp: the maximum; solo: the minimum
// over all). It returns the round times of iters×reps rounds.
func ModelA(mode Mode, n, q int, lo, hi, probeCost float64, iters, reps int, seed uint64) []float64 {
	out := make([]float64, 0, iters*reps)
	x := make([]float64, n)
	for r := range reps {
		rng := newRNG(seed*1000 + uint64(r))
		for range iters {
			for i := range x {
				x[i] = lo + rng.Float64()*(hi-lo)
			}
			switch mode {
			case BSP:
				out = append(out, slices.Max(x))
			case Solo:
				out = append(out, slices.Min(x))
			default:
				best := math.Inf(1)
				for _, p := range Sample(rng, n, q) {
					best = min(best, x[p])
				}
				out = append(out, best+probeCost*float64(q))
			}
		}
	}
	return out
}

// Sample returns k distinct indices of 0..n-1 in random order (a partial
// Fisher–Yates shuffle); k is clamped to n.
func Sample(rng *rand.Rand, n, k int) []int {
	k = min(k, n)
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := range k {
		j := i + rng.IntN(n-i)
		p[i], p[j] = p[j], p[i]
	}
	return p[:k]
}

// BResult is one Model B run.
type BResult struct {
	Round    float64 // mean round time, ms
	P50, P95 float64
	Contrib  float64   // mean Σw per round
	Thr      float64   // contributions per second
	MaxGap   int       // most rounds between two contributions of a worker
	Share    []float64 // contributions per round, by worker
	Rounds   []float64 // every round time
	Contribs []int     // Σw of every round
}

// ModelB is the continuous non-blocking loop (RNA's implementation
// semantics): workers compute back to back; round r starts at S, q probes
// are sampled, the round triggers at the first probed worker's readiness,
// every ready worker contributes, and the allreduce takes c while compute
// goes on. BSP is max over workers plus c, with workers idle after they
// finish.
func ModelB(mode Mode, n, q, rounds int, c float64, dur Dur, seed uint64) BResult {
	rng := newRNG(seed)
	res := BResult{Share: make([]float64, n)}
	if mode == BSP {
		for range rounds {
			m := 0.0
			for i := range n {
				m = max(m, dur(i, rng))
			}
			res.Rounds = append(res.Rounds, m+c)
			res.Contribs = append(res.Contribs, n)
		}
		res.Round = mean(res.Rounds)
		res.P50, res.P95 = Pct(res.Rounds, 50), Pct(res.Rounds, 95)
		res.Contrib = float64(n)
		res.Thr = float64(n) / res.Round * 1000
		for i := range res.Share {
			res.Share[i] = 1
		}
		return res
	}
	next := make([]float64, n)
	pending := make([]int, n)
	contrib := make([]int, n)
	last := make([]int, n)
	for i := range n {
		next[i] = dur(i, rng)
	}
	advance := func(t float64) {
		for i := range n {
			for next[i] <= t {
				pending[i]++
				next[i] += dur(i, rng)
			}
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	t := 0.0
	total := 0
	for r := 1; r <= rounds; r++ {
		s := t
		advance(s)
		probes := all
		if mode != Solo {
			probes = Sample(rng, n, q)
		}
		trig := math.Inf(1)
		for _, p := range probes {
			if pending[p] > 0 {
				trig = min(trig, s)
			} else {
				trig = min(trig, next[p])
			}
		}
		advance(trig)
		w := 0
		for i := range n {
			if pending[i] > 0 {
				w++
				contrib[i]++
				pending[i] = 0
				res.MaxGap = max(res.MaxGap, r-last[i])
				last[i] = r
			}
		}
		total += w
		res.Contribs = append(res.Contribs, w)
		t = trig + c
		res.Rounds = append(res.Rounds, t-s)
	}
	res.Round = mean(res.Rounds)
	res.P50, res.P95 = Pct(res.Rounds, 50), Pct(res.Rounds, 95)
	res.Contrib = float64(total) / float64(rounds)
	res.Thr = float64(total) / t * 1000
	for i := range n {
		res.Share[i] = float64(contrib[i]) / float64(rounds)
	}
	return res
}

// ConvConfig is the toy convergence run of seed-straggle-conv.py.
type ConvConfig struct {
	Mode   Mode // BSP, RNA or Solo (every worker probed)
	N, Q   int
	C      float64
	Gamma  float64
	Sigma  float64
	D      int
	Target float64
	Eta    int    // staleness bound in rounds; 0 = none
	Sum    bool   // accumulate by sum instead of the weighted average
	Max    int    // round limit
	Dur    Dur    // iteration times
	Seed   uint64 // random stream
}

// Conv runs the toy and returns the rounds and the simulated wall time
// (ms) to reach the target loss, f(x) = ½‖x‖² with stochastic gradient
// x + N(0, σ²I), x₀ = 1.
func Conv(cfg ConvConfig) (rounds int, t float64) {
	rng := newRNG(cfg.Seed)
	n, d := cfg.N, cfg.D
	x := make([]float64, d)
	for i := range x {
		x[i] = 1
	}
	loss := func() float64 {
		s := 0.0
		for _, v := range x {
			s += v * v
		}
		return s / 2
	}
	grad := func(at []float64) []float64 {
		g := make([]float64, d)
		for i := range g {
			g[i] = at[i] + rng.NormFloat64()*cfg.Sigma
		}
		return g
	}
	maxR := cfg.Max
	if maxR == 0 {
		maxR = 200000
	}
	if cfg.Mode == BSP {
		r := 0
		for loss() > cfg.Target && r < maxR {
			m := 0.0
			for i := range n {
				m = max(m, cfg.Dur(i, rng))
			}
			g := make([]float64, d)
			for range n {
				for k, v := range grad(x) {
					g[k] += v
				}
			}
			for k := range x {
				x[k] -= cfg.Gamma * g[k]
			}
			t += m + cfg.C
			r++
		}
		return r, t
	}
	type item struct {
		v int
		g []float64
	}
	next := make([]float64, n)
	for i := range n {
		next[i] = cfg.Dur(i, rng)
	}
	snap := make([][]float64, n)
	snapV := make([]int, n)
	for i := range n {
		snap[i] = slices.Clone(x)
	}
	pend := make([][]item, n)
	r := 0
	advance := func(T float64) {
		for i := range n {
			for next[i] <= T {
				pend[i] = append(pend[i], item{snapV[i], grad(snap[i])})
				snap[i] = slices.Clone(x)
				snapV[i] = r
				next[i] += cfg.Dur(i, rng)
			}
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	for loss() > cfg.Target && r < maxR {
		s := t
		advance(s)
		probes := all
		if cfg.Mode == RNA {
			probes = Sample(rng, n, cfg.Q)
		}
		trig := math.Inf(1)
		for _, p := range probes {
			if len(pend[p]) > 0 {
				trig = min(trig, s)
			} else {
				trig = min(trig, next[p])
			}
		}
		advance(trig)
		g := make([]float64, d)
		for i := range n {
			items := pend[i]
			if cfg.Eta > 0 {
				kept := items[:0:0]
				for _, it := range items {
					if r-it.v <= cfg.Eta {
						kept = append(kept, it)
					}
				}
				items = kept
			}
			if len(items) > 0 {
				vs := make([]int, len(items))
				gs := make([][]float64, len(items))
				for j, it := range items {
					vs[j], gs[j] = it.v, it.g
				}
				for k, v := range Accumulate(vs, gs, cfg.Sum) {
					g[k] += v
				}
			}
			pend[i] = nil
		}
		for k := range x {
			x[k] -= cfg.Gamma * g[k]
		}
		r++
		t = trig + cfg.C
	}
	return r, t
}

// Accumulate combines a worker's pending gradients, computed at versions
// vs: the thesis's linearly weighted average Σ(v−(k−τ)+1)·g / Σ(v−(k−τ)+1)
// (k the newest version, τ the version gap), or their plain sum.
func Accumulate(vs []int, gs [][]float64, sum bool) []float64 {
	out := make([]float64, len(gs[0]))
	k, lo := slices.Max(vs), slices.Min(vs)
	tau := k - lo
	wsum := 0.0
	for j, g := range gs {
		w := 1.0
		if !sum {
			w = float64(vs[j] - (k - tau) + 1)
		}
		wsum += w
		for i, v := range g {
			out[i] += w * v
		}
	}
	if !sum {
		for i := range out {
			out[i] /= wsum
		}
	}
	return out
}

// WaitBound is the thesis's §1.6 waiting-time bound for q choices at load
// rho: 1/(1−ρ) for q = 1, else Σ_{i≥1} ρ^((q^i − q)/(q − 1)).
func WaitBound(rho float64, q int) float64 {
	if q <= 1 {
		return 1 / (1 - rho)
	}
	s := 0.0
	qi := float64(q)
	for i := 1; i < 64; i++ {
		e := (qi - float64(q)) / float64(q-1)
		term := math.Pow(rho, e)
		s += term
		if term < 1e-12 {
			break
		}
		qi *= float64(q)
	}
	return s
}
