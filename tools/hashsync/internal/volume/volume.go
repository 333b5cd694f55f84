// Package volume is the closed-form communication volume of every scheme
// (seed-zen.md §1.6 and App. B.1; HiTopKComm from seed-topk.md §2.4), in
// payload bytes received per rank, so measured bytes can be held against
// theory; and Zen's rule choosing between Eq. (1) and Eq. (2).
package volume

import (
	"fmt"
	"math"
)

// Params describe a tensor and a job. Sizes are in rows of Width float32
// elements; an index is 4 bytes (element-level COO: Width 1).
type Params struct {
	N       int     // ranks
	Rows    float64 // |G| in rows
	Width   int     // elements per row
	Density float64 // d_G: fraction of rows present on one rank
	// Gamma returns the densification ratio γ^k = d^k/d_G for k ranks
	// (γ^1 = 1). See Bernoulli and FitGamma.
	Gamma func(k int) float64
	// Skew is the even-range skewness s^n (Def. 5), for sparse-ps and
	// omnireduce; 1 means balanced.
	Skew float64
	// Block is OmniReduce's block size in elements; BlockDensity the
	// fraction of its blocks that hold a non-zero on one rank and after
	// aggregation (0: derived from Density assuming uniform rows).
	Block                 int
	BlockDensity, BlockDN float64
	// Rho and Local are HiTopKComm's density and ranks per node.
	Rho   float64
	Local int
	// Pull is zen's pull encoding: "auto" (the smaller per message, the
	// default), "bitmap" or "coo".
	Pull string
}

// Bernoulli returns γ^k for the Bernoulli pool model with overlap q:
// (1 − (1−q)^k)/q.
func Bernoulli(q float64) func(int) float64 {
	return func(k int) float64 {
		if q >= 1 {
			return 1
		}
		return (1 - math.Pow(1-q, float64(k))) / q
	}
}

// FitGamma returns the Bernoulli γ^k whose γ^n equals gn (1 ≤ gn ≤ n), so
// that a single measured densification ratio gives the intermediate ones
// Eq. (2) needs.
func FitGamma(n int, gn float64) (func(int) float64, error) {
	if n == 1 || gn <= 1 {
		return func(int) float64 { return 1 }, nil
	}
	if gn > float64(n) {
		return nil, fmt.Errorf("γ^%d = %g exceeds %d", n, gn, n)
	}
	if gn == float64(n) {
		return func(k int) float64 { return float64(k) }, nil
	}
	lo, hi := 1e-12, 1.0
	for range 200 {
		q := (lo + hi) / 2
		if Bernoulli(q)(n) > gn { // γ falls as q grows
			lo = q
		} else {
			hi = q
		}
	}
	return Bernoulli((lo + hi) / 2), nil
}

// Row bytes.
func (p Params) coo() float64 { return float64(4 + 4*p.Width) } // index + row
func (p Params) val() float64 { return float64(4 * p.Width) }
func (p Params) nf() float64  { return float64(p.N) }

// Volume is one scheme's bytes received per rank, per step.
type Volume struct {
	Scheme string
	Steps  []Step
	// Bytes is the total.
	Bytes float64
	// Note says what the formula assumes.
	Note string
}

// Step is one phase of a scheme.
type Step struct {
	Name  string
	Bytes float64
}

func vol(name, note string, steps ...Step) Volume {
	v := Volume{Scheme: name, Steps: steps, Note: note}
	for _, s := range steps {
		v.Bytes += s.Bytes
	}
	return v
}

// Dense is the ring allreduce: 2(n−1)/n·M·4 bytes.
func (p Params) Dense() Volume {
	return vol("dense", "ring allreduce, 2(n−1)/n·4M",
		Step{"reduce-scatter", (p.nf() - 1) / p.nf() * p.Rows * p.val()},
		Step{"allgather", (p.nf() - 1) / p.nf() * p.Rows * p.val()})
}

// AGsparse: each rank receives the n−1 other COO tensors.
func (p Params) AGsparse() Volume {
	return vol("agsparse", "(n−1)·d·|G| rows of COO", Step{"allgather", (p.nf() - 1) * p.Density * p.Rows * p.coo()})
}

// BPCOO is Eq. (1) in bytes: push (n−1)/n·d|G|, pull (n−1)/n·γ^n d|G|, COO.
func (p Params) BPCOO() Volume {
	f := (p.nf() - 1) / p.nf() * p.Density * p.Rows * p.coo()
	return vol("bp-coo", "Eq. (1): (n−1)/n·(1+γ^n)·d|G| rows of COO", Step{"push", f}, Step{"pull", f * p.Gamma(p.N)})
}

// Zen is COO push and hash-bitmap pull (the bitmap totals |G|/8 bytes
// over all servers whatever the density: Theorem B.3), or COO pull where
// that is smaller (the per-message choice).
func (p Params) Zen() Volume {
	push := (p.nf() - 1) / p.nf() * p.Density * p.Rows * p.coo()
	vals := (p.nf() - 1) / p.nf() * p.Gamma(p.N) * p.Density * p.Rows
	bm, coo := vals*p.val()+(p.nf()-1)/p.nf()*p.Rows/8, vals*p.coo()
	pull, note := math.Min(bm, coo), "COO push + min(hash bitmap, COO) pull"
	switch p.Pull {
	case "bitmap":
		pull, note = bm, "COO push + hash-bitmap pull"
	case "coo":
		pull, note = coo, "COO push + COO pull"
	}
	return vol("zen", note, Step{"push", push}, Step{"pull", pull})
}

// SparCML is Eq. (2): stage i receives γ^{2^{i−1}}·d|G| rows of COO, or
// the dense tensor once that is smaller (the dense switch).
func (p Params) SparCML() Volume {
	var steps []Step
	for k, i := 1, 1; k < p.N; k, i = k*2, i+1 {
		b := math.Min(p.Gamma(k)*p.Density*p.Rows*p.coo(), p.Rows*p.val())
		steps = append(steps, Step{fmt.Sprintf("stage %d", i), b})
	}
	return vol("sparcml", "Eq. (2): Σ γ^{2^{i−1}}·d|G| rows of COO, dense when smaller", steps...)
}

// SparsePS is App. B.1: even ranges, so the busiest server receives and
// sends s^n times the balanced share.
func (p Params) SparsePS() Volume {
	s := math.Max(p.Skew, 1)
	f := (p.nf() - 1) / p.nf() * s * p.Density * p.Rows * p.coo()
	return vol("sparse-ps", "App. B.1: (n−1)/n·s^n·(d + d^n)|G|, busiest server", Step{"push", f}, Step{"pull", f * p.Gamma(p.N)})
}

// OmniReduce: even ranges of blocks of Block elements; a block travels
// with a 4-byte id when it holds a non-zero.
func (p Params) OmniReduce() Volume {
	B := float64(p.Block)
	if B <= 0 {
		B = 256
	}
	nb := math.Ceil(p.Rows * float64(p.Width) / B)
	rowsPerBlock := B / float64(p.Width)
	b1, bn := p.BlockDensity, p.BlockDN
	if b1 <= 0 {
		b1 = 1 - math.Pow(1-p.Density, rowsPerBlock)
	}
	if bn <= 0 {
		bn = 1 - math.Pow(1-math.Min(1, p.Gamma(p.N)*p.Density), rowsPerBlock)
	}
	s := math.Max(p.Skew, 1)
	// The busiest aggregator's range holds s times the mean share of
	// non-zero blocks, at most all of them.
	per := (p.nf() - 1) / p.nf() * nb * (4 + 4*B)
	return vol("omnireduce", "even block ranges, non-zero blocks with ids, busiest aggregator", Step{"push", per * math.Min(1, s*b1)}, Step{"pull", per * math.Min(1, s*bn)})
}

// HiTopK is HiTopKComm (lossless when Rho is 0: every non-zero row of
// the node sum travels).
func (p Params) HiTopK() Volume {
	L := max(p.Local, 1)
	m := float64(p.N / L)
	lf := float64(L)
	seg := p.Rows / lf
	var k float64
	if p.Rho > 0 {
		k = math.Max(1, math.Floor(p.Rho*seg))
	} else {
		k = math.Min(1, p.Gamma(L)*p.Density) * seg
	}
	out := math.Min(1, m*k/seg) * seg // rows of the aggregated segment, at most
	return vol("hitopk", "intra reduce-scatter, inter all-gather of k rows per segment, intra all-gather",
		Step{"intra-rs", (lf - 1) / lf * p.Rows * p.val()},
		Step{"inter-ag", (m - 1) * k * p.coo()},
		Step{"intra-ag", (lf - 1) * math.Min(out*p.coo(), seg*p.val())})
}

// LowerBound is [T]'s bound: the other ranks' non-zeros, values only,
// d^{n−1}|G|.
func (p Params) LowerBound() Volume {
	return vol("lower-bound", "d^{n−1}·|G| values, no indices", Step{"values", p.Gamma(p.N-1) * p.Density * p.Rows * p.val()})
}

// All returns every scheme's volume.
func (p Params) All() []Volume {
	return []Volume{p.Dense(), p.AGsparse(), p.SparCML(), p.SparsePS(), p.OmniReduce(), p.BPCOO(), p.Zen(), p.HiTopK(), p.LowerBound()}
}

// Choose applies Zen's rule: balanced parallelism ("zen") unless
// Σ_{i=1}^{log n} γ^{2^{i−1}} ≤ (n−1)/n·(γ^n+1), where hierarchical
// centralization ("sparcml") moves less.
func (p Params) Choose() (scheme string, lhs, rhs float64) {
	for k := 1; k < p.N; k *= 2 {
		lhs += p.Gamma(k)
	}
	rhs = (p.nf() - 1) / p.nf() * (p.Gamma(p.N) + 1)
	if lhs > rhs || p.N&(p.N-1) != 0 {
		return "zen", lhs, rhs
	}
	return "sparcml", lhs, rhs
}

// ImbalanceBound is the practical max-load bound 1 + sqrt(2 n ln n / m)
// for m keys hashed into n bins.
func ImbalanceBound(n int, m float64) float64 {
	return 1 + math.Sqrt(2*float64(n)*math.Log(float64(n))/m)
}
