package codec

import (
	"math"

	"trainwire.dev/lib/wire"
)

// scatterCodec is a sparsifier whose frame decodes to its values at its
// indices and zeros elsewhere (decodeSparse): topk, mstopk, threshold and
// dgc.
type scatterCodec interface {
	Codec
	scatters()
}

func (*topk) scatters()      {}
func (*mstopk) scatters()    {}
func (*threshold) scatters() {}
func (*dgc) scatters()       {}

// encodeScatter is Encode's fast path for a residual memory and a scatter
// codec, with the slow path's bits: the compensated gradient p is written
// into the residual e in place (the same expressions as
// residual.Compensate), the codec encodes it, and e ← p − sent touches only
// the k elements sent (p − 0 is p bit for bit everywhere else). No dense p,
// no dense decode, no dense update: on ResNet-101's gradients those were
// half of a topk sync's CPU. It reports false, having changed nothing, when
// p could overflow float32 (the slow path then rejects the non-finite p
// with the state untouched), since e is overwritten before the codec runs.
//
// maxG is the largest magnitude key (maxMag) of the gradient, finite.
func (e *Encoder) encodeScatter(in Input, r residual, st *State, maxG uint32) (*wire.Compressed, []float32, bool, error) {
	g := in.Data
	n := len(g)
	has := st.Has("e", n)
	f := float32(1) // the learning-rate rescaling of e
	rescale := has && r.lr > 0 && st.Has("lr", 1) && st.Slots["lr"][0] > 0
	if rescale {
		f = st.Slots["lr"][0] / r.lr
	}
	bound := math.Abs(float64(r.gamma)) * float64(math.Float32frombits(maxG))
	if has {
		maxE := float64(math.Float32frombits(maxMag(st.Slots["e"], 0)))
		bound += math.Abs(float64(r.beta)) * math.Abs(float64(f)) * maxE
	}
	if !(bound*(1+1.0/(1<<20)) < math.MaxFloat32) {
		return nil, nil, false, nil
	}
	p := st.Slot("e", n)
	cs := chunks(n, workers(0, n), 64)
	switch {
	case !has:
		parallel(cs, func(_ int, lo, hi int) {
			for i, v := range g[lo:hi] {
				p[lo+i] = r.gamma * v
			}
		})
	case rescale:
		parallel(cs, func(_ int, lo, hi int) {
			ec := p[lo:hi]
			for i, v := range g[lo:hi] {
				ec[i] = r.beta*(f*ec[i]) + r.gamma*v
			}
		})
	default:
		parallel(cs, func(_ int, lo, hi int) {
			ec := p[lo:hi]
			for i, v := range g[lo:hi] {
				ec[i] = r.beta*ec[i] + r.gamma*v
			}
		})
	}
	in.Data, in.State = p, st
	fr, err := e.Codec.Encode(in)
	if err != nil {
		// Finite input of the right shape: the codecs above do not fail
		// on it, and the bound above keeps p finite.
		return nil, nil, true, err
	}
	vals := f32s(fr.Parts[0].Data)
	idx := fr.Parts[1].Data
	for j, v := range vals {
		i := uint32(idx[4*j]) | uint32(idx[4*j+1])<<8 | uint32(idx[4*j+2])<<16 | uint32(idx[4*j+3])<<24
		p[i] -= v
	}
	if r.lr > 0 {
		st.Slot("lr", 1)[0] = r.lr
	}
	if e.NoSent {
		return fr, nil, true, nil
	}
	sent := make([]float32, n)
	decodeSparse(fr, sent)
	return fr, sent, true, nil
}
