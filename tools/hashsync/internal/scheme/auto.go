package scheme

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
)

// profile is what one server measures while auto profiles a tensor: the
// rows each worker pushed to it, and how many rows each worker added that
// lower ranks had not (so prefix sums give the union of ranks 0..k−1).
type profile struct {
	rowsFrom []int
	newRows  []int
	outRows  int
}

func newProfile(n int) *profile {
	return &profile{rowsFrom: make([]int, n), newRows: make([]int, n)}
}

// autoState is auto's running measurement of one tensor.
type autoState struct {
	lhs, rhs float64
	iters    int
	choice   string
	// trial is the candidate auto times after profiling ("" when none);
	// zenS and trialS are this rank's sync times (s) of zen while
	// profiling and of the trial. The tensor's first sync is kept apart
	// (first): it carries one-time costs (fresh buffers, the connections'
	// first bytes; 57-74 ms against 22-35 for the next ones, 2 ranks in
	// the 1 Gbit/s cluster), and with ProfileIters 3 it made zen's median
	// the larger of its two real samples against the trial's mean of two.
	trial        string
	first        float64
	zenS, trialS []float64
}

// zenTimes is the profiling syncs' times auto compares: all but the first
// when there are others.
func (a *autoState) zenTimes() []float64 {
	if len(a.zenS) == 0 {
		return []float64{a.first}
	}
	return a.zenS
}

// Rule evaluates Zen's choice between Eq. (1) (balanced parallelism) and
// Eq. (2) (hierarchical centralization) from the densification ratios
// gamma(k) = d^k/d for k = 1..n: LHS = Σ_{i=1}^{log n} γ^{2^{i−1}}, RHS =
// (n−1)/n·(γ^n + 1). Balanced parallelism is better iff LHS > RHS.
func Rule(n int, gamma func(k int) float64) (lhs, rhs float64) {
	for k := 1; k < n; k *= 2 {
		lhs += gamma(k)
	}
	rhs = float64(n-1) / float64(n) * (gamma(n) + 1)
	return lhs, rhs
}

// profileDone combines every server's profile of this iteration (a small
// all-to-all), updates the tensor's measurement and, after ProfileIters
// iterations, fixes the scheme for it on every rank alike.
func (s *Syncer) profileDone(t *Tensor, st *Stats) error {
	n := s.n
	prof := st.profile
	// Vector: rows pushed by each worker to this server, then the union of
	// workers 0..k−1 on this server for k = 1..n.
	vec := make([]uint64, 2*n)
	u := 0
	for q := range n {
		vec[q] = uint64(prof.rowsFrom[q])
		u += prof.newRows[q]
		vec[n+q] = uint64(u)
	}
	body := make([]byte, 0, 16*n)
	for _, v := range vec {
		body = binary.LittleEndian.AppendUint64(body, v)
	}
	all := others(n, s.r)
	got, err := s.exchange(s.meta, opProfile, all, func(int) message { return message{fmt: fmtDense, n: uint64(2 * n), body: body} }, all,
		func(p int, f uint32, k uint64) (int, error) {
			if f != fmtDense || k != uint64(2*n) {
				return 0, fmt.Errorf("profile: format %d with %d counts", f, k)
			}
			return 16 * n, nil
		})
	if err != nil {
		return err
	}
	got[s.r] = message{body: body}
	sum := make([]float64, 2*n)
	for q := range n {
		for i := range 2 * n {
			sum[i] += float64(binary.LittleEndian.Uint64(got[q].body[8*i:]))
		}
	}
	mean := 0.0
	for q := range n {
		mean += sum[q] / float64(n)
	}
	s.autoMu.Lock()
	defer s.autoMu.Unlock()
	a := s.auto[t.Name]
	if a == nil {
		a = &autoState{}
		s.auto[t.Name] = a
	}
	if mean > 0 && t.Rows > 0 {
		gamma := func(k int) float64 { return sum[n+k-1] / mean }
		lhs, rhs := Rule(n, gamma)
		st.Density, st.Gamma, st.LHS, st.RHS = mean/float64(t.Rows), gamma(n), lhs, rhs
		a.lhs += lhs
		a.rhs += rhs
	}
	a.iters++
	st.Choice = "profile"
	if a.iters >= s.cfg.ProfileIters {
		sparcml := n > 1 && bits.OnesCount(uint(n)) == 1
		st.Rule = "zen"
		if sparcml && a.rhs > a.lhs {
			st.Rule = "sparcml"
		}
		if sparcml && s.cfg.Trials > 0 {
			a.trial = "sparcml"
		} else {
			a.choice = st.Rule
			st.Choice = a.choice
		}
	}
	return nil
}

// autoDone is auto's bookkeeping after a sync of t that ran scheme in
// secs seconds: the profile while profiling (zen's time kept), the time of
// a trial, and, after the last trial, the choice.
func (s *Syncer) autoDone(t *Tensor, st *Stats, scheme string, secs float64) error {
	if s.cfg.Scheme != "auto" {
		return nil
	}
	if scheme == "profile" {
		s.autoMu.Lock()
		if a := s.auto[t.Name]; a != nil {
			a.zenS = append(a.zenS, secs)
		} else {
			s.auto[t.Name] = &autoState{first: secs}
		}
		s.autoMu.Unlock()
		return s.profileDone(t, st)
	}
	s.autoMu.Lock()
	a := s.auto[t.Name]
	if a == nil || a.choice != "" || a.trial != scheme {
		s.autoMu.Unlock()
		return nil
	}
	a.trialS = append(a.trialS, secs)
	st.Choice = "trial"
	done := len(a.trialS) >= s.cfg.Trials
	mine := []float64{median(a.zenTimes()), median(a.trialS)}
	s.autoMu.Unlock()
	if !done {
		return nil
	}
	worst, err := s.slowest(mine)
	if err != nil {
		return err
	}
	s.autoMu.Lock()
	defer s.autoMu.Unlock()
	a.choice = "zen"
	if worst[1] < worst[0] {
		a.choice = a.trial
	}
	st.Choice, st.ZenS, st.TrialS = a.choice, worst[0], worst[1]
	return nil
}

// slowest is the element-wise maximum of every rank's times (a small
// all-to-all): a sync takes as long as its slowest rank, and every rank
// decides on the same figures.
func (s *Syncer) slowest(mine []float64) ([]float64, error) {
	k := len(mine)
	body := make([]byte, 0, 8*k)
	for _, v := range mine {
		body = binary.LittleEndian.AppendUint64(body, math.Float64bits(v))
	}
	all := others(s.n, s.r)
	got, err := s.exchange(s.meta, opTrial, all, func(int) message { return message{fmt: fmtDense, n: uint64(k), body: body} }, all,
		func(p int, f uint32, c uint64) (int, error) {
			if f != fmtDense || c != uint64(k) {
				return 0, fmt.Errorf("trial times: format %d with %d values", f, c)
			}
			return 8 * k, nil
		})
	if err != nil {
		return nil, err
	}
	out := slices.Clone(mine)
	for p, m := range got {
		if p == s.r {
			continue
		}
		for i := range out {
			out[i] = max(out[i], math.Float64frombits(binary.LittleEndian.Uint64(m.body[8*i:])))
		}
	}
	return out, nil
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	ys := slices.Sorted(slices.Values(xs))
	if len(ys)%2 == 1 {
		return ys[len(ys)/2]
	}
	return (ys[len(ys)/2-1] + ys[len(ys)/2]) / 2
}
