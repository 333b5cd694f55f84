package pipeline

import "time"

// StageTimes are the per-iteration times of Eq. 6.1's terms
// (docs/sven.md): the input redistribution, sparse forward, forward
// alltoall, dense forward and backward, allreduce, optimizer, backward
// alltoall and sparse backward.
type StageTimes struct {
	All2All, SFP, FAll2All, FP, BP, AllReduce, Opt, BAll2All, SBP time.Duration
}

// Sequential is Eq. 6.1 per iteration: every term one after the other.
func (s StageTimes) Sequential() time.Duration {
	return s.All2All + s.SFP + s.FAll2All + s.FP + s.BP + s.AllReduce + s.Opt + s.BAll2All + s.SBP
}

// Pipelined is Eq. 6.2 per iteration: each communication overlapped
// with the computation of another mini-batch, the input redistribution
// off the critical path.
func (s StageTimes) Pipelined() time.Duration {
	return max(s.SFP+s.FP, s.FAll2All) + max(s.BP, s.BAll2All) + max(s.AllReduce, s.SBP) + s.Opt
}
