package calc

import (
	"math"
	"testing"
)

// D.4.5.
func TestWastedD45(t *testing.T) {
	w, err := Wasted(42, 42, 42, 0)
	if err != nil || w != 63+42 {
		t.Errorf("MT-NLG: %v %v, want 105 min", w, err)
	}
	w, err = Wasted(62, 62, 0, 62)
	if err != nil || w != 93 {
		t.Errorf("Gemini per-iteration: %v %v, want 93 s", w, err)
	}
	hf := HighFreqInterval(481, 62)
	if hf != 8 {
		t.Errorf("HighFreq interval %d, want ⌈481/62⌉ = 8", hf)
	}
	w, err = Wasted(481, 9*62, 481, 62)
	if err != nil || math.Abs(w-1241) > 0.5 {
		t.Errorf("HighFreq: %v %v, want ≈ 1241 s", w, err)
	}
	if r := w / 93; r < 13 {
		t.Errorf("HighFreq/Gemini = %.1f, want > 13", r)
	}
	if _, err := Wasted(10, 5, 0, 0); err == nil {
		t.Error("1/f < t_ckpt accepted (Eq. 6.2)")
	}
	if _, err := Wasted(1, 5, 0, 10); err == nil {
		t.Error("1/f < T_iter accepted (Eq. 6.2)")
	}
}

// D.4.6.
func TestSimulateD46(t *testing.T) {
	p := SimParams{FailuresPerDay: 15, GeminiOverhead: 7 * 60, Iter: 62, TCkpt: 481, TRtvl: 481, Serialize: 81,
		Detect: 15, Restart: 240, StrawmanInterval: 3 * 3600, HighFreqIters: 9}
	r := Simulate(p)
	if math.Abs(r.Gemini-0.927) > 0.001 || math.Abs(r.HighFreq-0.646) > 0.001 || r.Strawman != 0 {
		t.Errorf("1000 instances: %+v, want Gemini 0.927, HighFreq 0.646, Strawman 0", r)
	}
	p.GeminiOverhead = 8.5 * 60
	if r := Simulate(p); math.Abs(r.Gemini-0.91) > 0.002 {
		t.Errorf("O_g = 8.5 min: Gemini %.3f, want 0.91", r.Gemini)
	}
	// Monotone decline; Gemini ahead of both.
	prev := Simulate(SimParams{FailuresPerDay: 0, GeminiOverhead: 420, Iter: 62, TCkpt: 481, TRtvl: 481, Serialize: 81, Detect: 15, Restart: 240, StrawmanInterval: 10800})
	for f := 1.0; f <= 20; f++ {
		q := p
		q.GeminiOverhead, q.FailuresPerDay = 420, f
		r := Simulate(q)
		if r.Gemini > prev.Gemini || r.HighFreq > prev.HighFreq || r.Strawman > prev.Strawman || r.Gemini < r.HighFreq || r.Gemini < r.Strawman {
			t.Fatalf("F=%g: %+v after %+v", f, r, prev)
		}
		prev = r
	}
}
