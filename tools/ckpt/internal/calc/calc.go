// Package calc holds Gemini's wasted-time and frequency arithmetic
// (Eq. 6.1, 6.2, the HighFreq baseline and the effective-training-time
// model of the seed notes D.4.6).
package calc

import (
	"fmt"
	"math"
)

// Wasted is Eq. 6.1: T_wasted = t_ckpt + 1/(2f) + t_rtvl for failures
// uniform between checkpoints, where interval = 1/f. It enforces Eq. 6.2,
// 1/f ≥ max(t_ckpt, T_iter) (a checkpoint cannot start before the previous
// one completes, and more than one per iteration is pointless); iter ≤ 0
// skips the T_iter half.
func Wasted(tCkpt, interval, tRtvl, iter float64) (float64, error) {
	for _, v := range []struct {
		name string
		x    float64
	}{{"t_ckpt", tCkpt}, {"1/f", interval}, {"t_rtvl", tRtvl}} {
		if v.x < 0 || math.IsNaN(v.x) || math.IsInf(v.x, 0) {
			return 0, fmt.Errorf("calc: %s = %g (must be finite and ≥ 0)", v.name, v.x)
		}
	}
	if interval+1e-12 < tCkpt {
		return 0, fmt.Errorf("calc: Eq. 6.2 violated: 1/f = %g s is shorter than t_ckpt = %g s (a checkpoint cannot start before the previous one completes)", interval, tCkpt)
	}
	if iter > 0 && interval+1e-12 < iter {
		return 0, fmt.Errorf("calc: Eq. 6.2 violated: 1/f = %g s is shorter than T_iter = %g s (at most one checkpoint per iteration)", interval, iter)
	}
	return tCkpt + interval/2 + tRtvl, nil
}

// HighFreqInterval is the HighFreq baseline's interval: ⌈t_ckpt / T_iter⌉
// iterations (at least 1).
func HighFreqInterval(tCkpt, iter float64) int {
	if iter <= 0 {
		return 1
	}
	n := int(math.Ceil(tCkpt/iter - 1e-9))
	if n < 1 {
		n = 1
	}
	return n
}

// Ratios are the effective-training-time ratios of the three policies.
type Ratios struct {
	Gemini, HighFreq, Strawman float64
}

// SimParams are the inputs of the D.4.6 model.
type SimParams struct {
	// FailuresPerDay is F (thesis: 0.015 × instances).
	FailuresPerDay float64
	// GeminiOverhead is O_g, the time lost per failure with Gemini (s).
	GeminiOverhead float64
	// Iter is T_iter (s); TCkpt and TRtvl the persistent-storage checkpoint
	// and retrieval times (s); Serialize the blocking torch.save (s);
	// Detect and Restart the failure detection and warm-up times (s);
	// StrawmanInterval the strawman's checkpoint period (s).
	Iter, TCkpt, TRtvl, Serialize, Detect, Restart, StrawmanInterval float64
	// HighFreqIters is HighFreq's interval in iterations; 0 means
	// ⌈t_ckpt/T_iter⌉ (the thesis's run used 9).
	HighFreqIters int
}

// Simulate evaluates the effective-training-time model of D.4.6:
//
//	gemini   = 1 − F·O_g/86400
//	highfreq = I/(I+S) · (1 − F·W_h/86400), I = HighFreqIters·T_iter,
//	           W_h = t_ckpt + I/2 + t_rtvl + detect + restart
//	strawman = 1 − F·W_s/86400, W_s = t_ckpt + interval/2 + t_rtvl + detect + restart
//
// each clamped to [0, 1].
func Simulate(p SimParams) Ratios {
	clamp := func(x float64) float64 { return math.Max(0, math.Min(1, x)) }
	day := 86400.0
	hf := p.HighFreqIters
	if hf <= 0 {
		hf = HighFreqInterval(p.TCkpt, p.Iter)
	}
	i := float64(hf) * p.Iter
	wh := p.TCkpt + i/2 + p.TRtvl + p.Detect + p.Restart
	ws := p.TCkpt + p.StrawmanInterval/2 + p.TRtvl + p.Detect + p.Restart
	return Ratios{
		Gemini:   clamp(1 - p.FailuresPerDay*p.GeminiOverhead/day),
		HighFreq: clamp(i / (i + p.Serialize) * (1 - p.FailuresPerDay*wh/day)),
		Strawman: clamp(1 - p.FailuresPerDay*ws/day),
	}
}
