package codec

import (
	"fmt"

	"trainwire.dev/lib/wire"
)

// Memory is an error-feedback mechanism (GRACE's Memory): Compensate turns
// a gradient into the tensor to compress, Update folds what was sent back
// into the state.
type Memory interface {
	// Name is the memory's name: none, residual, dgc, efsignsgd, powersgd.
	Name() string
	// Compensate returns the tensor to compress for gradient g. It may
	// return g itself, or a slot of st.
	Compensate(st *State, g []float32) []float32
	// Update records that p was compressed into f, which decodes to sent.
	Update(st *State, p, sent []float32, f *wire.Compressed)
}

// MemoryOptions parametrise the memories.
type MemoryOptions struct {
	// Beta and Gamma: residual's p = Beta·e + Gamma·g (defaults 1, 1).
	Beta, Gamma float64
	// Momentum is DGC's momentum m (default 0.9).
	Momentum float64
	// LR is efsignsgd's learning rate γ in p = e + γ·g (default 1).
	LR float64
}

// Memories lists the memory names.
var Memories = []string{"none", "residual", "dgc", "efsignsgd", "powersgd"}

// NewMemory returns the memory name.
func NewMemory(name string, o MemoryOptions) (Memory, error) {
	def := func(v, d float64) float32 {
		if v == 0 {
			return float32(d)
		}
		return float32(v)
	}
	switch name {
	case "", "none":
		return noMemory{}, nil
	case "residual":
		return residual{name: "residual", beta: def(o.Beta, 1), gamma: def(o.Gamma, 1)}, nil
	case "powersgd":
		// PowerSGD's error feedback is the plain residual; its warm-start Q
		// is codec state, kept in the same store.
		return residual{name: "powersgd", beta: 1, gamma: 1}, nil
	case "efsignsgd":
		return residual{name: "efsignsgd", beta: 1, gamma: def(o.LR, 1)}, nil
	case "dgc":
		return dgcMemory{m: def(o.Momentum, 0.9)}, nil
	}
	return nil, fmt.Errorf("codec: unknown memory %q (known: %v)", name, Memories)
}

type noMemory struct{}

func (noMemory) Name() string                                        { return "none" }
func (noMemory) Compensate(_ *State, g []float32) []float32          { return g }
func (noMemory) Update(_ *State, _, _ []float32, _ *wire.Compressed) {}

// residual: p = β·e + γ·g; e ← p − sent. With β = γ = 1 and a sparsifier,
// sent + e reproduces p bit for bit (each element is in exactly one).
type residual struct {
	name        string
	beta, gamma float32
}

func (r residual) Name() string { return r.name }

func (r residual) Compensate(st *State, g []float32) []float32 {
	p := make([]float32, len(g))
	if !st.Has("e", len(g)) {
		for i, v := range g {
			p[i] = r.gamma * v
		}
		return p
	}
	e := st.Slots["e"]
	for i, v := range g {
		p[i] = r.beta*e[i] + r.gamma*v
	}
	return p
}

func (r residual) Update(st *State, p, sent []float32, _ *wire.Compressed) {
	e := st.Slot("e", len(p))
	for i := range p {
		e[i] = p[i] - sent[i]
	}
}

// dgcMemory is DGC's momentum correction with momentum-factor masking:
// u ← m·u + g; v ← v + u; compress v; then v ← v − sent and u is zeroed
// where an element was sent.
type dgcMemory struct{ m float32 }

func (dgcMemory) Name() string { return "dgc" }

func (d dgcMemory) Compensate(st *State, g []float32) []float32 {
	u := st.Slot("u", len(g))
	v := st.Slot("v", len(g))
	for i, x := range g {
		u[i] = d.m*u[i] + x
		v[i] += u[i]
	}
	p := make([]float32, len(g))
	copy(p, v)
	return p
}

func (d dgcMemory) Update(st *State, p, sent []float32, f *wire.Compressed) {
	u := st.Slot("u", len(p))
	v := st.Slot("v", len(p))
	for i := range p {
		v[i] = p[i] - sent[i]
	}
	if idx, ok := sentIndices(f); ok {
		for _, i := range idx {
			u[i] = 0
		}
		return
	}
	for i := range sent {
		if sent[i] != 0 {
			u[i] = 0
		}
	}
}

// sentIndices returns a sparse frame's indices.
func sentIndices(f *wire.Compressed) ([]uint32, bool) {
	for _, p := range f.Parts {
		if p.Name == "indices" && p.DType == wire.U32 {
			return u32s(p.Data), true
		}
	}
	return nil, false
}

// Encoder runs a codec with a memory over a stream of tensors, keeping
// per-tensor state by name.
type Encoder struct {
	Codec  Codec
	Memory Memory
	Store  *Store
}

// Encode compresses gradient in.Data with error feedback and returns the
// frame and the dense tensor it decodes to. Non-finite input is rejected
// before any state changes.
func (e *Encoder) Encode(in Input) (*wire.Compressed, []float32, error) {
	if err := checkShape(in); err != nil {
		return nil, nil, err
	}
	if e.Store == nil {
		e.Store = NewStore()
	}
	mem := e.Memory
	if mem == nil {
		mem = noMemory{}
	}
	if _, none := mem.(noMemory); !none {
		// Reject before the memory touches its state; without a memory
		// the codec's own fused check does it.
		if err := CheckFinite(in.Name, in.Data); err != nil {
			return nil, nil, err
		}
	}
	st := e.Store.Get(in.Name)
	p := mem.Compensate(st, in.Data)
	in.Data = p
	in.State = st
	f, err := e.Codec.Encode(in)
	if err != nil {
		return nil, nil, err
	}
	sent := make([]float32, len(p))
	if err := e.Codec.decode(f, sent); err != nil {
		return nil, nil, err
	}
	mem.Update(st, p, sent, f)
	return f, sent, nil
}
