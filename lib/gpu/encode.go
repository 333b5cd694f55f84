package gpu

import (
	"trainwire.dev/lib/rng"

	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// Algos are the codecs the GPU encodes; for the others (randomk, dgc,
// threshold, signum, natural, powersgd) use the CPU (lib/codec).
var Algos = []string{"bf16", "efsignsgd", "fp16", "mstopk", "onebit", "qsgd", "signsgd", "terngrad", "topk"}

// Memories are the error-feedback memories the GPU keeps (on the device):
// none, and residual p = β·e + γ·g with its efsignsgd form (β = 1, γ = lr).
var Memories = []string{"none", "residual", "efsignsgd"}

// Encoder compresses tensors on a GPU with error feedback, as
// codec.Encoder does on the CPU, and writes the same frames byte for byte.
// The residual of every tensor stays on the device; Store is the host copy
// that SyncStore fills (for --state-out) and that a first Encode of a
// tensor name reads (for --state-in).
type Encoder struct {
	dev         *Device
	ref         codec.Codec
	algo        string
	opts        codec.Options
	mem         string
	beta, gamma float32
	// Store is the error-feedback state on the host side (codec's format).
	Store *codec.Store
	state map[string]*devState
}

type devState struct {
	e    buffer
	n    int64
	hasE bool
}

// NewEncoder returns an encoder of codec algo (one of Algos) with options
// o and memory mem (one of Memories) on dev.
func NewEncoder(dev *Device, algo string, o codec.Options, mem string, mo codec.MemoryOptions) (*Encoder, error) {
	if !slices.Contains(Algos, algo) {
		return nil, fmt.Errorf("gpu: algorithm %q has no GPU kernels (GPU: %v; use --device cpu)", algo, Algos)
	}
	ref, err := codec.New(algo, o)
	if err != nil {
		return nil, err
	}
	if mo.RescaleLR > 0 {
		return nil, fmt.Errorf("gpu: learning-rate-rescaled error feedback is not kept on the GPU (use --device cpu)")
	}
	if (algo == "qsgd" && o.Levels > 127) || (algo == "terngrad" && o.Clip > 0) {
		// The kernels implement the default encodings only.
		return nil, fmt.Errorf("gpu: %s with %v has no GPU kernels (use --device cpu)", algo, ref.Params())
	}
	def := func(v, d float64) float32 {
		if v == 0 {
			return float32(d)
		}
		return float32(v)
	}
	e := &Encoder{dev: dev, ref: ref, algo: algo, opts: o, Store: codec.NewStore(), state: map[string]*devState{}}
	switch mem {
	case "", "none":
		e.mem = "none"
	case "residual":
		e.mem, e.beta, e.gamma = mem, def(mo.Beta, 1), def(mo.Gamma, 1)
	case "efsignsgd":
		e.mem, e.beta, e.gamma = mem, 1, def(mo.LR, 1)
	default:
		return nil, fmt.Errorf("gpu: memory %q is not kept on the GPU (GPU: %v; use --device cpu)", mem, Memories)
	}
	return e, nil
}

// Codec returns the CPU codec with the same parameters (for Params, Size
// and decoding).
func (e *Encoder) Codec() codec.Codec { return e.ref }

// Encode compresses in.Data (error feedback applied) and returns the frame,
// identical to codec.Encoder's for the same input, state and options.
// Non-finite input is rejected (a *codec.NonFiniteError) before any state
// changes.
func (e *Encoder) Encode(in codec.Input) (*wire.Compressed, error) {
	d := e.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := checkShape(in); err != nil {
		return nil, err
	}
	n := int64(len(in.Data))
	x, err := d.scratchBuf("x", 4*n)
	if err != nil {
		return nil, err
	}
	if err := d.htod(x, f32b(in.Data)); err != nil {
		return nil, err
	}
	return e.encodeOn(x, n, in)
}

// EncodeTensor is Encode for a tensor already on the device (Upload):
// no host-to-device copy; the frame's parts are copied back to the host,
// as the wire needs them. in.Data may be nil (then a non-finite input is
// reported by copying the tensor back to find the element).
func (e *Encoder) EncodeTensor(t *Tensor, in codec.Input) (*wire.Compressed, error) {
	d := e.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	if in.Data == nil {
		if in.Shape != nil {
			if n, err := wire.Numel(in.Shape); err != nil || n != t.n {
				return nil, fmt.Errorf("gpu: tensor %q: shape %v for %d elements", in.Name, in.Shape, t.n)
			}
		}
	} else if int64(len(in.Data)) != t.n {
		return nil, fmt.Errorf("gpu: tensor %q: %d host elements, %d on the device", in.Name, len(in.Data), t.n)
	} else if err := checkShape(in); err != nil {
		return nil, err
	}
	return e.encodeOn(t.buf.p, t.n, in)
}

// encodeOn encodes the n floats at x (called with d.mu held).
func (e *Encoder) encodeOn(x dptr, n int64, in codec.Input) (*wire.Compressed, error) {
	d := e.dev
	var err error
	hostData := func() ([]float32, error) {
		if in.Data != nil {
			return in.Data, nil
		}
		h := make([]float32, n)
		return h, d.dtoh(f32b(h), x)
	}
	src := x
	var st *devState
	var p dptr
	if e.mem != "none" {
		// Reject non-finite gradients before the memory changes.
		if bad, _, err := d.maxKey(x, n); err != nil {
			return nil, err
		} else if bad {
			h, err := hostData()
			if err != nil {
				return nil, err
			}
			return nil, codec.CheckFinite(in.Name, h)
		}
		if st, err = e.stateFor(in.Name, n); err != nil {
			return nil, err
		}
		if p, err = d.scratchBuf("p", 4*n); err != nil {
			return nil, err
		}
		hase := uint64(0)
		if st.hasE {
			hase = 1
		}
		if err := d.launch("tw_ef_compensate", n, blockThreads, x, st.e.p, p, uint64(n),
			uint64(math.Float32bits(e.beta)), uint64(math.Float32bits(e.gamma)), hase); err != nil {
			return nil, err
		}
		src = p
	}
	var sent dptr
	if st != nil {
		if sent, err = d.scratchBuf("sent", 4*n); err != nil {
			return nil, err
		}
	}
	parts, err := e.encode(src, n, in, sent)
	if err != nil {
		if _, ok := err.(errNonFinite); ok {
			var host []float32
			if src != x { // the compensated tensor overflowed: name its element
				host = make([]float32, n)
				if err := d.dtoh(f32b(host), src); err != nil {
					return nil, err
				}
			} else if host, err = hostData(); err != nil {
				return nil, err
			}
			if err := codec.CheckFinite(in.Name, host); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("gpu: %s: the device flagged a non-finite value the host cannot find", in.Name)
		}
		return nil, err
	}
	if st != nil {
		if err := d.launch("tw_ef_update", n, blockThreads, p, sent, st.e.p, uint64(n)); err != nil {
			return nil, err
		}
		st.hasE = true
	}
	shape := slices.Clone(in.Shape)
	if shape == nil {
		shape = []int64{n}
	}
	return &wire.Compressed{Name: in.Name, Step: in.Step, Rank: in.Rank, Algo: e.ref.Algo(), Params: e.ref.Params(),
		DType: wire.F32, Shape: shape, Parts: parts}, nil
}

// stateFor returns the device residual of tensor name, loading it from
// Store the first time (a --state-in checkpoint).
func (e *Encoder) stateFor(name string, n int64) (*devState, error) {
	d := e.dev
	if st, ok := e.state[name]; ok && st.n == n {
		return st, nil
	} else if ok {
		d.be.free(st.e.p)
		delete(e.state, name)
	}
	p, err := d.be.alloc(max(4*n, 8))
	if err != nil {
		return nil, fmt.Errorf("gpu: residual of %q: %w", name, err)
	}
	st := &devState{e: buffer{p, max(4*n, 8)}, n: n}
	if hs := e.Store.Get(name); hs.Has("e", int(n)) {
		if err := d.htod(p, f32b(hs.Slots["e"])); err != nil {
			return nil, err
		}
		st.hasE = true
	}
	e.state[name] = st
	return st, nil
}

// SyncStore copies every device residual into Store (slot "e"), so that
// Store.WriteTo writes the same state stream as the CPU encoder.
func (e *Encoder) SyncStore() error {
	d := e.dev
	d.mu.Lock()
	defer d.mu.Unlock()
	for name, st := range e.state {
		if !st.hasE {
			continue
		}
		v := e.Store.Get(name).Slot("e", int(st.n))
		if err := d.dtoh(f32b(v), st.e.p); err != nil {
			return err
		}
	}
	return nil
}

// Close frees the device residuals.
func (e *Encoder) Close() {
	for _, st := range e.state {
		e.dev.be.free(st.e.p)
	}
	e.state = map[string]*devState{}
}

// errNonFinite is the device's NaN/Inf flag; Encode turns it into the
// codec's *NonFiniteError naming the element.
type errNonFinite struct{}

func (errNonFinite) Error() string { return "non-finite input" }

// encode runs the codec's kernels on src (n floats on the device) and
// returns the frame's parts; when sent is not zero it also writes the
// tensor the frame decodes to there (for the error-feedback update).
func (e *Encoder) encode(src dptr, n int64, in codec.Input, sent dptr) ([]wire.Part, error) {
	switch e.algo {
	case "signsgd", "efsignsgd", "onebit":
		return e.encodeSign(src, n, in, sent)
	case "terngrad":
		return e.encodeTernGrad(src, n, in, sent)
	case "qsgd":
		return e.encodeQSGD(src, n, in, sent)
	case "fp16", "bf16":
		return e.encodeHalf(src, n, in, sent)
	case "topk", "mstopk":
		return e.encodeTopK(src, n, in, sent)
	}
	return nil, fmt.Errorf("gpu: no kernels for %q", e.algo)
}

// encodeSign encodes with the sign family: the packed signs, and
// efsignsgd's scale or onebit's two means.
func (e *Encoder) encodeSign(src dptr, n int64, in codec.Input, sent dptr) ([]wire.Part, error) {
	d := e.dev
	nb := (n + 7) / 8
	bits, err := d.scratchBuf("bits", nb)
	if err != nil {
		return nil, err
	}
	invert := uint64(0)
	if e.algo == "onebit" {
		invert = 1
	}
	bad, npos, err := d.signPack(src, n, bits, invert)
	if err != nil {
		return nil, err
	}
	if bad {
		return nil, errNonFinite{}
	}
	hb := make([]byte, nb)
	if err := d.dtoh(hb, bits); err != nil {
		return nil, err
	}
	parts := []wire.Part{{Name: "bits", DType: wire.U8, Shape: []int64{nb}, Data: hb}}
	one, zero := float32(1), float32(-1)
	if e.algo != "signsgd" {
		sum, sumAbs, err := d.signSums(src, n)
		if err != nil {
			return nil, err
		}
		if e.algo == "efsignsgd" {
			scale := float32(0)
			if n > 0 {
				scale = float32(sumAbs / float64(n))
			}
			one, zero = scale, -scale
			parts = append(parts, wire.Part{Name: "scale", DType: wire.F32, Shape: []int64{1}, Data: f32le(scale)})
		} else {
			nn := n - npos
			sn, sp := (sum-sumAbs)/2, (sum+sumAbs)/2
			var mn, mp float32
			if nn > 0 {
				mn = float32(sn / float64(nn))
			}
			if npos > 0 {
				mp = float32(sp / float64(npos))
			}
			one, zero = mn, mp
			parts = append(parts, wire.Part{Name: "means", DType: wire.F32, Shape: []int64{2}, Data: append(f32le(mn), f32le(mp)...)})
		}
	}
	if sent != 0 {
		err = d.launch("tw_unpack_select", n, blockThreads, bits, sent, uint64(n),
			uint64(math.Float32bits(one)), uint64(math.Float32bits(zero)))
	}
	return parts, err
}

// encodeTernGrad encodes with TernGrad: two bits per element and the
// scale (the maximum magnitude).
func (e *Encoder) encodeTernGrad(src dptr, n int64, in codec.Input, sent dptr) ([]wire.Part, error) {
	d := e.dev
	bad, m, err := d.maxKey(src, n)
	if err != nil {
		return nil, err
	}
	if bad {
		return nil, errNonFinite{}
	}
	nb := (n + 7) / 8
	bits, err := d.scratchBuf("bits", 2*nb)
	if err != nil {
		return nil, err
	}
	if err := d.be.memset0(bits, 2*nb); err != nil {
		return nil, err
	}
	s := math.Float32frombits(m)
	if s > 0 {
		key := rng.Key(e.opts.Seed, in.Step, in.Name, rng.PurposeRound)
		if err := d.launch("tw_terngrad", nb, blockThreads, src, bits, uint64(n), uint64(nb), key, 1/float64(s)); err != nil {
			return nil, err
		}
	}
	hb := make([]byte, 2*nb)
	if err := d.dtoh(hb, bits); err != nil {
		return nil, err
	}
	if sent != 0 {
		if err := d.launch("tw_terngrad_decode", n, blockThreads, bits, sent, uint64(n), uint64(nb), uint64(m)); err != nil {
			return nil, err
		}
	}
	return []wire.Part{{Name: "bits", DType: wire.U8, Shape: []int64{2 * nb}, Data: hb},
		{Name: "scale", DType: wire.F32, Shape: []int64{1}, Data: f32le(s)}}, nil
}

// encodeQSGD encodes with QSGD: the L2 norm and one signed level per element.
func (e *Encoder) encodeQSGD(src dptr, n int64, in codec.Input, sent dptr) ([]wire.Part, error) {
	d := e.dev
	ss, err := d.sumSquares(src, n)
	if err != nil {
		return nil, err
	}
	if math.IsNaN(ss) || math.IsInf(ss, 0) {
		return nil, errNonFinite{}
	}
	levels := e.ref.Params()["levels"].(int64)
	norm := float32(math.Sqrt(ss))
	codes, err := d.scratchBuf("codes", n)
	if err != nil {
		return nil, err
	}
	if err := d.be.memset0(codes, n); err != nil {
		return nil, err
	}
	if norm > 0 {
		sc24 := float32(float64(levels) / float64(norm) * (1 << 24))
		maxT := uint32(levels) << 24
		key := rng.Key(e.opts.Seed, in.Step, in.Name, rng.PurposeRound)
		if err := d.launch("tw_qsgd", (n+1)/2, blockThreads, src, codes, uint64(n),
			uint64(math.Float32bits(sc24)), uint64(maxT), key); err != nil {
			return nil, err
		}
	}
	hc := make([]byte, n)
	if err := d.dtoh(hc, codes); err != nil {
		return nil, err
	}
	if sent != 0 {
		u := norm / float32(levels)
		if err := d.launch("tw_qsgd_decode", n, blockThreads, codes, sent, uint64(n), uint64(math.Float32bits(u))); err != nil {
			return nil, err
		}
	}
	return []wire.Part{{Name: "norm", DType: wire.F32, Shape: []int64{1}, Data: f32le(norm)},
		{Name: "codes", DType: wire.I8, Shape: []int64{n}, Data: hc}}, nil
}

// encodeHalf encodes with fp16 or bf16: every element rounded to a half.
func (e *Encoder) encodeHalf(src dptr, n int64, in codec.Input, sent dptr) ([]wire.Part, error) {
	d := e.dev
	out, err := d.scratchBuf("half", 2*n)
	if err != nil {
		return nil, err
	}
	flag, err := d.flags()
	if err != nil {
		return nil, err
	}
	kern, dt, bf := "tw_fp16", wire.F16, uint64(0)
	if e.algo == "bf16" {
		kern, dt, bf = "tw_bf16", wire.BF16, 1
	}
	if err := d.launch(kern, (n+3)/4, blockThreads, src, out, uint64(n), flag); err != nil { // 4 elements a thread
		return nil, err
	}
	if bad, err := d.readFlag(flag); err != nil {
		return nil, err
	} else if bad {
		return nil, errNonFinite{}
	}
	h := make([]byte, 2*n)
	if err := d.dtoh(h, out); err != nil {
		return nil, err
	}
	if sent != 0 {
		if err := d.launch("tw_half_decode", n, blockThreads, out, sent, uint64(n), bf); err != nil {
			return nil, err
		}
	}
	return []wire.Part{{Name: "data", DType: dt, Shape: []int64{n}, Data: h}}, nil
}

// encodeTopK encodes with top-k (exact) or MSTopK (threshold search): k
// values and their indices.
func (e *Encoder) encodeTopK(src dptr, n int64, in codec.Input, sent dptr) ([]wire.Part, error) {
	d := e.dev
	k := codec.KFor(n, e.ref.Params()["ratio"].(float64), e.ref.Params()["k"].(int64))
	var idx, vals dptr
	var err error
	if idx, err = d.scratchBuf("idx", 4*k); err != nil {
		return nil, err
	}
	if vals, err = d.scratchBuf("vals", 4*k); err != nil {
		return nil, err
	}
	if e.algo == "topk" {
		err = d.topK(src, n, k, vals, idx)
	} else {
		key := rng.Key(e.opts.Seed, in.Step, in.Name, rng.PurposeWindow)
		_, err = d.msTopK(src, n, k, int(e.ref.Params()["samplings"].(int64)), key, vals, idx)
	}
	if err != nil {
		return nil, err
	}
	hv, hi := make([]byte, 4*k), make([]byte, 4*k)
	if err := d.dtoh(hv, vals); err != nil {
		return nil, err
	}
	if err := d.dtoh(hi, idx); err != nil {
		return nil, err
	}
	if sent != 0 {
		if err := d.be.memset0(sent, 4*n); err != nil {
			return nil, err
		}
		if err := d.launch("tw_scatter", k, blockThreads, sent, idx, vals, uint64(k)); err != nil {
			return nil, err
		}
	}
	return []wire.Part{{Name: "values", DType: wire.F32, Shape: []int64{k}, Data: hv},
		{Name: "indices", DType: wire.U32, Shape: []int64{k}, Data: hi}}, nil
}

func checkShape(in codec.Input) error {
	if in.Shape != nil {
		n, err := wire.Numel(in.Shape)
		if err != nil {
			return fmt.Errorf("codec: tensor %q: %w", in.Name, err)
		}
		if n > math.MaxUint32 {
			return fmt.Errorf("codec: tensor %q: %d elements: codecs take at most 2^32-1", in.Name, n)
		}
		if n != int64(len(in.Data)) {
			return fmt.Errorf("codec: tensor %q: shape %v holds %d elements, data %d", in.Name, in.Shape, n, len(in.Data))
		}
	} else if int64(len(in.Data)) > math.MaxUint32 {
		return fmt.Errorf("codec: tensor %q: %d elements: codecs take at most 2^32-1", in.Name, len(in.Data))
	}
	return nil
}

func f32le(v float32) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, math.Float32bits(v))
	return b
}
