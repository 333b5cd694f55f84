package codec

import (
	"fmt"
	"math"

	"trainwire.dev/lib/tensor"
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
	// RescaleLR, when positive, is the current learning rate for
	// learning-rate-rescaled error feedback (BytePS): the residual kept
	// from a step at learning rate lr' is scaled by lr'/lr before it is
	// added, p = β·(f·e) + γ·g with f = f32(lr')/f32(lr) in float32, and
	// lr is kept in the state slot "lr". Residual-type memories only
	// (residual, efsignsgd, powersgd); 0 (default) is off.
	RescaleLR float64
	// ClipNorm, when positive, is DGC's local gradient clipping: the dgc
	// memory scales g by f32(ClipNorm/‖g‖₂) (‖g‖₂ in float64, in order)
	// when ‖g‖₂ > ClipNorm, before the momentum. 0 (default) is off.
	ClipNorm float64
}

// Memories lists the memory names.
var Memories = []string{"none", "residual", "dgc", "efsignsgd", "powersgd"}

// MemoryInfo describes one memory for listings.
type MemoryInfo struct {
	Name   string
	Params map[string]string // option → default
	Doc    string
}

// MemoryInfos describes every memory, in Memories' order. Every memory
// but none also takes Encoder.Point (per-compression-point state).
func MemoryInfos() []MemoryInfo {
	return []MemoryInfo{
		{"none", map[string]string{}, "no error feedback"},
		{"residual", map[string]string{"beta": "1", "gamma": "1", "rescale_lr": "0 (off)"},
			"p = β·e + γ·g, e ← p − x̂; with --ef-lr, e enters scaled by lr'/lr (BytePS)"},
		{"dgc", map[string]string{"momentum": "0.9", "clip_norm": "0 (off)"},
			"DGC momentum correction: u = m·u + g, v = v + u, v ← v − x̂, u masked where sent; with --dgc-clip, g first clipped to that L2 norm"},
		{"efsignsgd", map[string]string{"lr": "1", "rescale_lr": "0 (off)"}, "p = e + lr·g, e ← p − x̂ (Karimireddy'19)"},
		{"powersgd", map[string]string{"rescale_lr": "0 (off)"}, "p = e + g, e ← p − x̂, with the codec's warm-start Q"},
	}
}

// NewMemory returns the memory name.
func NewMemory(name string, o MemoryOptions) (Memory, error) {
	def := func(v, d float64) float32 {
		if v == 0 {
			return float32(d)
		}
		return float32(v)
	}
	if !(o.RescaleLR >= 0) || math.IsInf(o.RescaleLR, 0) {
		return nil, fmt.Errorf("codec: memory %s: learning rate %v is not a finite number ≥ 0", name, o.RescaleLR)
	}
	if o.RescaleLR > 0 && name != "residual" && name != "efsignsgd" && name != "powersgd" {
		return nil, fmt.Errorf("codec: memory %q: learning-rate rescaling needs residual, efsignsgd or powersgd", name)
	}
	if !(o.ClipNorm >= 0) || math.IsInf(o.ClipNorm, 0) {
		return nil, fmt.Errorf("codec: memory %s: clip norm %v is not a finite number ≥ 0", name, o.ClipNorm)
	}
	if o.ClipNorm > 0 && name != "dgc" {
		return nil, fmt.Errorf("codec: memory %q: gradient clipping is the dgc memory's", name)
	}
	lr := float32(o.RescaleLR)
	switch name {
	case "", "none":
		return noMemory{}, nil
	case "residual":
		return residual{name: "residual", beta: def(o.Beta, 1), gamma: def(o.Gamma, 1), lr: lr}, nil
	case "powersgd":
		// PowerSGD's error feedback is the plain residual; its warm-start Q
		// is codec state, kept in the same store.
		return residual{name: "powersgd", beta: 1, gamma: 1, lr: lr}, nil
	case "efsignsgd":
		return residual{name: "efsignsgd", beta: 1, gamma: def(o.LR, 1), lr: lr}, nil
	case "dgc":
		return dgcMemory{m: def(o.Momentum, 0.9), clip: o.ClipNorm}, nil
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
	lr          float32 // > 0: learning-rate rescaling, the current rate
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
	if r.lr > 0 && st.Has("lr", 1) && st.Slots["lr"][0] > 0 {
		f := st.Slots["lr"][0] / r.lr
		for i, v := range g {
			p[i] = r.beta*(f*e[i]) + r.gamma*v
		}
		return p
	}
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
	if r.lr > 0 {
		st.Slot("lr", 1)[0] = r.lr
	}
}

// dgcMemory is DGC's momentum correction with momentum-factor masking:
// u ← m·u + g; v ← v + u; compress v; then v ← v − sent and u is zeroed
// where an element was sent.
type dgcMemory struct {
	m    float32
	clip float64 // > 0: local gradient clipping to this L2 norm
}

func (dgcMemory) Name() string { return "dgc" }

func (d dgcMemory) Compensate(st *State, g []float32) []float32 {
	if d.clip > 0 {
		var ss float64
		for _, x := range g {
			ss += float64(x) * float64(x)
		}
		if n := math.Sqrt(ss); n > d.clip {
			f := float32(d.clip / n)
			c := make([]float32, len(g))
			for i, x := range g {
				c[i] = f * x
			}
			g = c
		}
	}
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
			return tensor.Uint32sOrCopy(p.Data), true
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
	// Point names the compression point (e.g. "rs" and "ag" of a
	// two-stage reduce-scatter/all-gather scheme, each with its own
	// residual): when set, state is kept under "<tensor>#<point>"
	// (PointSep), so one tensor compressed at several points has one
	// state per point. Empty (default): state by tensor name.
	Point string
	// NoSent: the caller does not use the dense tensor Encode returns
	// (it adds its own frame as it adds the other ranks', or a ring
	// reduces the encodings). With a residual memory and a sparsifier or
	// fp16/bf16 Encode then returns nil for it and never builds it.
	NoSent bool
}

// PointSep separates the tensor name from the compression point in the
// state's keys (and so in the state stream: "w#rs@e").
const PointSep = "#"

// Encode compresses gradient in.Data with error feedback and returns the
// frame and the dense tensor it decodes to (nil with NoSent, for a
// residual memory with a sparsifier or fp16/bf16). Non-finite input is rejected before
// any state changes.
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
	var maxG uint32 // the largest magnitude key of the gradient
	if _, none := mem.(noMemory); !none {
		// Reject before the memory touches its state; without a memory
		// the codec's own fused check does it.
		if maxG = maxMag(in.Data, 0); maxG >= 0x7f800000 {
			return nil, nil, CheckFinite(in.Name, in.Data)
		}
	}
	key := in.Name
	if e.Point != "" {
		key += PointSep + e.Point
	}
	st := e.Store.Get(key)
	if r, ok := mem.(residual); ok {
		if f, sent, done, err := e.encodeInPlace(in, r, st, maxG); done {
			return f, sent, err
		}
	}
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
