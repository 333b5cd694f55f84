package fusion

import (
	"fmt"
	"time"
)

// Baseline is a plan made by a fixed rule, for comparison.
type Baseline struct {
	// Name is the rule: "layer-wise", "fuse-all", "bucket" or "even".
	Name string
	// Param is the bucket threshold in size units, or the number of
	// groups of an even split; 0 otherwise.
	Param  float64
	Groups []Group
	Time   float64
}

// Label is e.g. "bucket 25 MB" or "even 4".
func (b Baseline) Label() string {
	switch b.Name {
	case "bucket":
		return fmt.Sprintf("bucket %g MB", b.Param/1e6)
	case "even":
		return fmt.Sprintf("even %g", b.Param)
	}
	return b.Name
}

// LayerWise is one group per tensor (GRACE, layer-wise compression).
func LayerWise(n int) []Group {
	g := make([]Group, n)
	for i := range g {
		g[i] = Group{i, i}
	}
	return g
}

// FuseAll is a single group.
func FuseAll(n int) []Group { return []Group{{0, n - 1}} }

// Buckets is DDP/Horovod-style bucket fusion: tensors are appended in
// backprop order and a bucket closes once its size reaches threshold; the
// last bucket takes the rest.
func Buckets(p *Problem, threshold float64) []Group {
	var g []Group
	first, acc := 0, 0.0
	for i, s := range p.Size {
		acc += s
		if acc >= threshold {
			g = append(g, Group{first, i})
			first, acc = i+1, 0
		}
	}
	if first < p.N() {
		g = append(g, Group{first, p.N() - 1})
	}
	return g
}

// EvenSplit splits n tensors into k groups of equal count (the first n%k
// groups get one more); k is capped at n.
func EvenSplit(n, k int) []Group {
	k = min(max(k, 1), n)
	g := make([]Group, 0, k)
	first := 0
	for a := range k {
		size := n / k
		if a < n%k {
			size++
		}
		g = append(g, Group{first, first + size - 1})
		first += size
	}
	return g
}

// DefaultBuckets are the bucket thresholds compared: 2 to 128 MB (decimal).
var DefaultBuckets = []float64{2e6, 4e6, 8e6, 16e6, 32e6, 64e6, 128e6}

// DefaultSplits are the even-split group counts compared: 2 to 32.
var DefaultSplits = []int{2, 4, 8, 16, 32}

// Baselines evaluates layer-wise, fuse-all, bucket fusion at each threshold
// (in the problem's size units) and even splits into each group count
// (skipping counts above N).
func Baselines(p *Problem, buckets []float64, splits []int) []Baseline {
	n := p.N()
	var out []Baseline
	add := func(name string, param float64, g []Group) {
		out = append(out, Baseline{Name: name, Param: param, Groups: g, Time: p.Time(g)})
	}
	add("layer-wise", 0, LayerWise(n))
	add("fuse-all", 0, FuseAll(n))
	for _, t := range buckets {
		add("bucket", t, Buckets(p, t))
	}
	for _, k := range splits {
		if k <= n {
			add("even", float64(k), EvenSplit(n, k))
		}
	}
	return out
}

// Algorithms accepted by Plan.
const (
	AlgoAuto   = "auto"
	AlgoAlg51  = "alg51"
	AlgoPareto = "pareto"
	AlgoBrute  = "brute"
)

// MaxBrute is the largest N brute force accepts.
const MaxBrute = 24

// Result is a plan with its provenance.
type Result struct {
	Groups []Group
	Time   float64
	Steps  []Step
	// Algo is the algorithm that ran (auto resolves to pareto).
	Algo string
	// ProvenOptimal is true when the search was exact and complete: pareto
	// and brute always, alg51 on subadditive costs within its budget.
	ProvenOptimal bool
	Stats         Stats
	Wall          time.Duration
}

// Plan finds a plan with the named algorithm.
func Plan(p *Problem, algo string, o Alg51Options) (Result, error) {
	start := time.Now()
	if algo == AlgoAuto {
		// The exact search is correct for every cost shape and, at O(N³)
		// for linear compression costs, far faster than Algorithm 5.1,
		// which is exponential in the worst case (docs/fuser.md); auto
		// never runs Algorithm 5.1's prunings where they are unsound.
		algo = AlgoPareto
	}
	r := Result{Algo: algo}
	switch algo {
	case AlgoAlg51:
		var complete bool
		r.Groups, r.Time, r.Stats, complete = Alg51(p, o)
		r.ProvenOptimal = complete && p.Subadditive()
		if r.ProvenOptimal {
			// Prune 2 may skip a plan that ties with the optimum and that
			// the tie-break prefers (golden G2); report the canonical plan
			// of the optimal time, found by the exact search.
			cg, ct, _ := Pareto(p)
			if !tie(ct, r.Time) {
				return r, fmt.Errorf("internal error: alg51 found %g, the exact search %g on subadditive costs", r.Time, ct)
			}
			r.Groups = cg
		}
	case AlgoPareto:
		r.Groups, r.Time, r.Stats = Pareto(p)
		r.ProvenOptimal = true
	case AlgoBrute:
		if p.N() > MaxBrute {
			return r, fmt.Errorf("brute force takes 2^(N-1) plans: N = %d is over %d (use pareto)", p.N(), MaxBrute)
		}
		r.Groups, r.Time, r.Stats = Brute(p)
		r.ProvenOptimal = true
	default:
		return r, fmt.Errorf("unknown algorithm %q (auto, alg51, pareto, brute)", algo)
	}
	r.Wall = time.Since(start)
	_, r.Steps = p.Eval(r.Groups)
	return r, nil
}
