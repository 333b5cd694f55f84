package codec

import (
	"fmt"

	"trainwire.dev/lib/rng"
)

// Distributed PowerSGD (Vogels et al.'19, Algorithm 1 with its two
// all-reduces), the pieces `compressor sync --collective powersgd` runs
// between its collectives. The powersgd codec's Encode computes P, its
// orthonormalisation and Q on one rank; here P = M·Q is summed over the
// ranks before it is orthonormalised, and Q = Mᵀ·P̂ after, so the result
// P̂·(ΣQ)ᵀ is the rank-r approximation of the sum. Every rank must start
// from the same warm-start Q: the one drawn from (seed, name) on the first
// step, then the summed Q of the previous step (SetQ).

// PowerSGDPlan is a tensor's matrix view under a powersgd codec.
type PowerSGDPlan struct {
	// N rows, M columns, R = min(rank, N, M). Matrix is false for
	// tensors PowerSGD sends uncompressed (fewer than two dimensions, or a
	// dimension of 1): then only N·M = d matters.
	N, M, R int
	Matrix  bool
	seed    uint64
}

// PowerSGDPlanFor returns the matrix view of shape under c, which must be
// a powersgd codec.
func PowerSGDPlanFor(c Codec, shape []int64) (PowerSGDPlan, error) {
	p, ok := c.(*powersgd)
	if !ok {
		return PowerSGDPlan{}, fmt.Errorf("codec: %s is not powersgd: %w", c.Algo(), ErrWrongAlgo)
	}
	d, err := numel(shape)
	if err != nil {
		return PowerSGDPlan{}, err
	}
	n, m, r, ok := p.dims(shape)
	if !ok {
		return PowerSGDPlan{N: int(d), M: 1, seed: p.seed}, nil
	}
	return PowerSGDPlan{N: int(n), M: int(m), R: int(r), Matrix: true, seed: p.seed}, nil
}

// WarmQ returns the warm-start Q (M×R, row-major) of tensor name from st:
// slot "q" when it has M·R elements, else drawn from the standard-normal
// stream keyed by (seed, name), as the codec draws it, and stored.
func (pl PowerSGDPlan) WarmQ(name string, st *State) []float32 {
	n := pl.M * pl.R
	if st.Has("q", n) {
		return st.Slots["q"]
	}
	q := st.Slot("q", n)
	s := rng.Seq{Key: rng.Key(pl.seed, 0, name, rng.PurposePowerSGD)}
	for i := range q {
		q[i] = float32(normal(&s))
	}
	return q
}

// P returns M·Q (N×R) for the matrix x (N×M, row-major), accumulated in
// float64 and rounded once to float32.
func (pl PowerSGDPlan) P(x, q []float32) []float32 {
	p := make([]float64, pl.N*pl.R)
	mulMQ(p, x, q, pl.N, pl.M, pl.R)
	out := make([]float32, len(p))
	for i, v := range p {
		out[i] = float32(v)
	}
	return out
}

// Orthonormalize runs the codec's modified Gram–Schmidt (float64) on the
// R columns of p (N×R) in place, rounding back to float32.
func (pl PowerSGDPlan) Orthonormalize(p []float32) {
	a := make([]float64, len(p))
	for i, v := range p {
		a[i] = float64(v)
	}
	orthonormalize(a, pl.N, pl.R)
	for i, v := range a {
		p[i] = float32(v)
	}
}

// Q returns Mᵀ·P (M×R) for the matrix x and the orthonormal p, in float64
// rounded once to float32.
func (pl PowerSGDPlan) Q(x, p []float32) []float32 {
	qn := make([]float64, pl.M*pl.R)
	mulMtP(qn, x, p, pl.N, pl.M, pl.R)
	out := make([]float32, len(qn))
	for i, v := range qn {
		out[i] = float32(v)
	}
	return out
}

// Decode writes P·Qᵀ (N×M) into dst, as the codec decodes a frame.
func (pl PowerSGDPlan) Decode(dst, p, q []float32) { mulPQt(dst, p, q, pl.N, pl.M, pl.R) }

// SetQ stores q as the next step's warm start.
func (pl PowerSGDPlan) SetQ(st *State, q []float32) { copy(st.Slot("q", len(q)), q) }
