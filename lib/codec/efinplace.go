package codec

import (
	"math"

	"trainwire.dev/lib/wire"
)

// Residual error feedback in place, for the codecs whose decoding is cheap
// to apply to the residual directly: the sparsifiers that decode by
// scatter, and fp16/bf16. Same bits as the generic path (Compensate, a
// dense decoded copy, Update): the compensated gradient p is written into
// the residual e in place with residual.Compensate's expressions, the
// codec encodes it, and e ← p − sent is applied where sent is not zero
// (scatter) or block by block from the encoding (halves). No dense p, and
// with Encoder.NoSent no dense decoded copy: on ResNet-101's gradients
// those were half of a topk sync's CPU.

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

// encodeInPlace is Encode's fast path for a residual memory r and a
// scatter or half codec. It reports false, having changed nothing, for
// another codec or when p could overflow float32 (the generic path then
// rejects the non-finite p with the state untouched), since e is
// overwritten before the codec runs. maxG is the gradient's largest
// magnitude key (maxMag), finite.
func (e *Encoder) encodeInPlace(in Input, r residual, st *State, maxG uint32) (*wire.Compressed, []float32, bool, error) {
	_, scatter := e.Codec.(scatterCodec)
	h, isHalf := e.Codec.(*half)
	if !scatter && !isHalf {
		return nil, nil, false, nil
	}
	p, ok := compensateInPlace(r, st, in.Data, maxG)
	if !ok {
		return nil, nil, false, nil
	}
	in.Data, in.State = p, st
	fr, err := e.Codec.Encode(in)
	if err != nil {
		// Finite input of the right shape: these codecs do not fail on
		// it, and the bound keeps p finite.
		return nil, nil, true, err
	}
	if r.lr > 0 {
		st.Slot("lr", 1)[0] = r.lr
	}
	var sent []float32
	if !e.NoSent {
		sent = make([]float32, len(p))
	}
	if scatter {
		subtractSparse(p, fr)
		if sent != nil {
			decodeSparse(fr, sent)
		}
	} else {
		subtractHalves(p, sent, fr.Parts[0].Data, h.dt == wire.BF16)
	}
	return fr, sent, true, nil
}

// CompensateInPlace is Memory.Compensate for a residual memory (residual,
// efsignsgd, powersgd) without a fresh p: p = β·e + γ·g (residual's
// expressions, so the same bits) is written into the state's residual
// slot and returned, for a caller that ends the step with m.Update(st, p,
// sent, f), which then sets e ← p − sent in place. ok is false, with
// nothing changed, for another memory, a non-finite g, or a p that could
// overflow float32: the caller then takes the generic path (which rejects
// a non-finite g or p with the state untouched).
func CompensateInPlace(m Memory, st *State, g []float32) (p []float32, ok bool) {
	r, isResidual := m.(residual)
	if !isResidual {
		return nil, false
	}
	maxG := maxMag(g, 0)
	if maxG >= 0x7f800000 {
		return nil, false
	}
	return compensateInPlace(r, st, g, maxG)
}

// compensateInPlace writes p = β·e + γ·g (with learning-rate rescaling as
// residual.Compensate) into the residual slot and returns it, or reports
// false, changing nothing, when p could overflow float32.
func compensateInPlace(r residual, st *State, g []float32, maxG uint32) ([]float32, bool) {
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
		return nil, false
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
	return p, true
}

// subtractSparse takes a scatter frame's values from e at their indices.
func subtractSparse(e []float32, fr *wire.Compressed) {
	vals := f32s(fr.Parts[0].Data)
	idx := fr.Parts[1].Data
	for j, v := range vals {
		i := uint32(idx[4*j]) | uint32(idx[4*j+1])<<8 | uint32(idx[4*j+2])<<16 | uint32(idx[4*j+3])<<24
		e[i] -= v
	}
}

// subtractHalves sets e ← e − decode(halves), block by block, and the
// decoded values into sent when it is not nil.
func subtractHalves(e, sent []float32, halves []byte, bf16 bool) {
	dec := f16Decode
	if bf16 {
		dec = bf16Decode
	}
	n := len(e)
	parallel(chunks(n, workers(0, n), 64), func(_ int, lo, hi int) {
		const block = 2048
		var tmp [block]float32
		for i := lo; i < hi; i += block {
			m := min(block, hi-i)
			d := tmp[:m]
			if sent != nil {
				d = sent[i : i+m]
			}
			dec(d, halves[2*i:2*(i+m)])
			ec := e[i : i+m]
			for j, v := range d {
				ec[j] -= v
			}
		}
	})
}
