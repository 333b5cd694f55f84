// Package costmodel holds the cost models trainwire's planners evaluate:
// the time of a communication or a compression as a function of its size,
// linear (α + β·x) or piecewise ("constant below a threshold, then
// linear", as GPU kernels behave), fitted by least squares from measured
// samples; α-β models of the collectives (allreduce, reduce-scatter,
// allgather, broadcast, reduce, alltoall, gather), flat or split into
// intra- and inter-machine phases, from a cluster description
// (collective.go); host-device copies; and codec encode/decode time
// models fitted from `compressor bench` samples (codec.go).
package costmodel

import (
	"errors"
	"fmt"
	"math"
	"sort"
)

// Cost is a time as a function of a size. Units are the caller's (the
// planners use nanoseconds and bytes).
type Cost interface {
	// At returns the cost of one operation on x units (x > 0).
	At(x float64) float64
	// Subadditive reports whether the cost is monotone nondecreasing and
	// subadditive (At(a+b) <= At(a)+At(b)): the condition under which
	// Cupcake's Algorithm 5.1 prunings are sound.
	Subadditive() bool
	// String describes the model, e.g. "linear(α=500, β=0.25)".
	String() string
}

// Linear is α + β·x.
type Linear struct {
	Alpha, Beta float64
}

// At implements Cost.
func (l Linear) At(x float64) float64 { return l.Alpha + l.Beta*x }

// Subadditive implements Cost: true when α ≥ 0 and β ≥ 0.
func (l Linear) Subadditive() bool { return l.Alpha >= 0 && l.Beta >= 0 }

func (l Linear) String() string { return fmt.Sprintf("linear(alpha=%g, beta=%g)", l.Alpha, l.Beta) }

// Piecewise is α below Threshold and α + β·(x − Threshold) above it: a
// fixed launch cost that hides the size-dependent part for small inputs.
// With Threshold > 0 and β > 0 it is not subadditive.
type Piecewise struct {
	Alpha, Beta, Threshold float64
}

// At implements Cost.
func (p Piecewise) At(x float64) float64 { return p.Alpha + p.Beta*math.Max(0, x-p.Threshold) }

// Subadditive implements Cost: only in the degenerate cases that are
// linear.
func (p Piecewise) Subadditive() bool {
	return p.Alpha >= 0 && p.Beta >= 0 && (p.Threshold <= 0 || p.Beta == 0)
}

func (p Piecewise) String() string {
	return fmt.Sprintf("piecewise(alpha=%g, beta=%g, threshold=%g)", p.Alpha, p.Beta, p.Threshold)
}

// Sample is one measurement: an operation on X units took T.
type Sample struct {
	X, T float64
}

// Fit is a fitted cost model with its quality.
type Fit struct {
	Cost Cost
	// RMSE is the root-mean-square relative error of the fit over the
	// samples.
	RMSE float64
	// LinearRMSE is the RMSE of the best linear fit, for comparison.
	LinearRMSE float64
	N          int
}

// ErrSamples is returned for sample sets that cannot be fitted.
var ErrSamples = errors.New("costmodel: samples")

// FitLinear fits α + β·x by least squares on the relative error (weights
// 1/T², so a 10 µs launch cost is not drowned by the noise of a 100 ms
// sample), and returns the fit's RMS relative error. At least one sample
// is needed; with a single distinct x the model is constant (β = 0). α and
// β are never negative: when the unconstrained fit has either below zero,
// the best fit on the boundary (α = 0 or β = 0) is returned.
func FitLinear(s []Sample) (Linear, float64, error) {
	if err := checkSamples(s); err != nil {
		return Linear{}, 0, err
	}
	var n, sx, sy, sxx, sxy float64
	for _, p := range s {
		w := weight(p)
		n += w
		sx += w * p.X
		sy += w * p.T
		sxx += w * p.X * p.X
		sxy += w * p.X * p.T
	}
	den := n*sxx - sx*sx
	var l Linear
	if math.Abs(den) <= 1e-12*math.Max(1, n*sxx) {
		l = Linear{Alpha: sy / n}
	} else {
		l.Beta = (n*sxy - sx*sy) / den
		l.Alpha = (sy - l.Beta*sx) / n
	}
	if l.Alpha < 0 || l.Beta < 0 {
		// A time cannot fall with size or start below zero: noisy samples
		// (a loaded machine) fit that way. The best fit with α, β ≥ 0 lies
		// on a boundary: through the origin (α = 0) or flat (β = 0).
		l = nonNegFit(s, Linear{Beta: math.Max(0, sxy/sxx)}, Linear{Alpha: math.Max(0, sy/n)})
	}
	return l, rmse(l, s), nil
}

// nonNegFit is the candidate with the smaller relative error.
func nonNegFit(s []Sample, a, b Linear) Linear {
	if rmse(a, s) <= rmse(b, s) {
		return a
	}
	return b
}

// FitAuto fits a linear model and a piecewise one (trying every sample's x
// as the threshold) and keeps the piecewise model only when it halves the
// linear RMSE with at least 4 samples: measured GPU codecs are flat below
// a size and linear above it (Cupcake, Fig 5.2), and a planner must know
// when its costs are not subadditive.
func FitAuto(s []Sample) (Fit, error) {
	lin, lerr, err := FitLinear(s)
	if err != nil {
		return Fit{}, err
	}
	best := Fit{Cost: lin, RMSE: lerr, LinearRMSE: lerr, N: len(s)}
	if len(s) < 4 {
		return best, nil
	}
	xs := make([]float64, len(s))
	for i, p := range s {
		xs[i] = p.X
	}
	sort.Float64s(xs)
	for _, thr := range xs[1 : len(xs)-1] {
		pw := fitPiecewise(s, thr)
		if e := rmse(pw, s); e < best.RMSE {
			best.Cost, best.RMSE = pw, e
		}
	}
	if _, ok := best.Cost.(Piecewise); ok && best.RMSE > 0.5*lerr {
		best.Cost, best.RMSE = lin, lerr
	}
	return best, nil
}

// fitPiecewise fits α + β·max(0, x − thr) by least squares for a fixed
// threshold (a linear regression on the transformed x).
func fitPiecewise(s []Sample, thr float64) Piecewise {
	t := make([]Sample, len(s))
	for i, p := range s {
		t[i] = Sample{X: math.Max(0, p.X-thr), T: p.T}
	}
	l, _, _ := FitLinear(t)
	return Piecewise{Alpha: l.Alpha, Beta: l.Beta, Threshold: thr}
}

// weight is 1/T² (relative error), or 1 for a zero time.
func weight(p Sample) float64 {
	if p.T > 0 {
		return 1 / (p.T * p.T)
	}
	return 1
}

// rmse is the root-mean-square relative error of c over s.
func rmse(c Cost, s []Sample) float64 {
	var ss float64
	for _, p := range s {
		d := c.At(p.X) - p.T
		ss += d * d * weight(p)
	}
	return math.Sqrt(ss / float64(len(s)))
}

func checkSamples(s []Sample) error {
	if len(s) == 0 {
		return fmt.Errorf("%w: none to fit", ErrSamples)
	}
	for i, p := range s {
		if math.IsNaN(p.X) || math.IsNaN(p.T) || math.IsInf(p.X, 0) || math.IsInf(p.T, 0) || p.X < 0 || p.T < 0 {
			return fmt.Errorf("%w: sample %d is (%g, %g): sizes and times must be finite and non-negative", ErrSamples, i, p.X, p.T)
		}
	}
	return nil
}
