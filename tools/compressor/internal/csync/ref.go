package csync

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/wire"
)

// Ref computes in one process what a world of N ranks' Syncers compute:
// every rank's encoders with their own state (Stores[r]), the sums in the
// orders the collectives define, with plain loops and whole frames (no
// payload reassembly). Tests compare every rank's result with it bit for
// bit, and the byte counters with its closed-form volumes.
type Ref struct {
	N      int
	Stores []*codec.Store
}

// NewRef returns the reference of a world of n ranks, state empty.
func NewRef(n int) *Ref {
	r := &Ref{N: n, Stores: make([]*codec.Store, n)}
	for i := range r.Stores {
		r.Stores[i] = codec.NewStore()
	}
	return r
}

// Volume is the payload bytes each rank sends per phase.
type Volume map[string][]int64

func (v Volume) add(phase string, r int, b int) {
	if b == 0 {
		return
	}
	v[phase][r] += int64(b)
}

func (R *Ref) enc(r int, sp Spec, point string, in codec.Input) (*wire.Compressed, []float32, error) {
	mem, err := codec.NewMemory(sp.Memory, sp.MemOpts)
	if err != nil {
		return nil, nil, err
	}
	in.Rank = int64(r)
	e := codec.Encoder{Codec: sp.Codec, Memory: mem, Store: R.Stores[r], Point: point}
	return e.Encode(in)
}

func frameBytes(f *wire.Compressed) int {
	n := 0
	for _, p := range f.Parts {
		n += len(p.Data)
	}
	return n
}

func decodeAll(f *wire.Compressed) ([]float32, error) { return codec.Decode(f, nil) }

// addLoop is acc[i] += x[i], the plain loop.
func addLoop(acc, x []float32) {
	for i := range acc {
		acc[i] += x[i]
	}
}

// RingSum sums xs (one per rank) as the ring accumulates: chunk k in the
// order collective.RingOrder(n, k), s = x_first, then s = x_j + s.
func RingSum(xs [][]float32) []float32 {
	n, L := len(xs), len(xs[0])
	out := make([]float32, L)
	for k := range n {
		lo, hi := collective.Chunk(L, n, k)
		o := collective.RingOrder(n, k)
		for i := lo; i < hi; i++ {
			s := xs[o[0]][i]
			for _, j := range o[1:] {
				s = xs[j][i] + s
			}
			out[i] = s
		}
	}
	return out
}

// ringVolume adds the ring's volumes for L elements of elem bytes.
func (R *Ref) ringVolume(v Volume, L, elem int, gather bool) {
	n := R.N
	if n == 1 {
		return
	}
	for r := range n {
		lo, hi := collective.Chunk(L, n, r)
		v.add("reduce-scatter", r, elem*(L-(hi-lo)))
		if gather {
			lo, hi = collective.Chunk(L, n, (r+1)%n)
			v.add("allgather", r, elem*(L-(hi-lo)))
		}
	}
}

// agVolume adds a ring allgather of blocks of sizes[k] bytes.
func (R *Ref) agVolume(v Volume, sizes []int) {
	n := R.N
	if n == 1 {
		return
	}
	for r := range n {
		v.add("allgather", r, sum(sizes)-sizes[(r+1)%n])
	}
}

// Sync returns the result every rank gets for units us (us[r] is rank r's)
// with spec sp, and each rank's payload bytes per phase.
func (R *Ref) Sync(us []*Unit, sp Spec) ([]float32, Volume, error) {
	sp, err := sp.Resolve()
	if err != nil {
		return nil, nil, err
	}
	n := R.N
	v := Volume{"reduce-scatter": make([]int64, n), "allgather": make([]int64, n), "alltoall": make([]int64, n)}
	var out []float32
	switch sp.Collective {
	case Dense:
		R.ringVolume(v, len(us[0].Data), 4, true)
		out = RingSum(datas(us))
	case AllGather:
		out, err = R.allGather(us, sp, v)
	case Ring:
		out, err = R.ring(us, sp, v)
	case Partitioned, A2AAG, A2ADense:
		out, err = R.partitioned(us, sp, v)
	case RSAG:
		out, err = R.rsag(us, sp, v)
	case PowerSGD:
		out, err = R.powerSGD(us, sp, v)
	default:
		return nil, nil, fmt.Errorf("reference: collective %q", sp.Collective)
	}
	if err != nil {
		return nil, nil, err
	}
	return out, v, nil
}

// inputOf is u as a codec input.
func inputOf(u *Unit) codec.Input {
	return codec.Input{Name: u.Name, Step: u.Step, Shape: u.Shape, Data: u.Data}
}

// datas lists the units' tensors.
func datas(us []*Unit) [][]float32 {
	xs := make([][]float32, len(us))
	for r, u := range us {
		xs[r] = u.Data
	}
	return xs
}

// allGather: every rank's frame decoded and summed in rank order.
func (R *Ref) allGather(us []*Unit, sp Spec, v Volume) ([]float32, error) {
	acc := make([]float32, len(us[0].Data))
	sizes := make([]int, R.N)
	for r := range R.N {
		f, _, err := R.enc(r, sp, "", inputOf(us[r]))
		if err != nil {
			return nil, err
		}
		x, err := decodeAll(f)
		if err != nil {
			return nil, err
		}
		addLoop(acc, x)
		sizes[r] = frameBytes(f)
	}
	R.agVolume(v, sizes)
	return acc, nil
}

// ring: the compressed ring, summing in the encoded domain chunk by chunk
// in each chunk's ring order (fp16/bf16: each hop's sum re-rounded;
// randomk: the values).
func (R *Ref) ring(us []*Unit, sp Spec, v Volume) ([]float32, error) {
	n := R.N
	fs := make([]*wire.Compressed, n)
	for r := range n {
		var err error
		if fs[r], _, err = R.enc(r, sp, "", inputOf(us[r])); err != nil {
			return nil, err
		}
	}
	f := *fs[0]
	switch a := sp.Codec.Algo(); a {
	case "fp16", "bf16":
		d := len(us[0].Data)
		R.ringVolume(v, d, 2, true)
		f.Parts = []wire.Part{{Name: "data", DType: fs[0].Parts[0].DType, Shape: fs[0].Parts[0].Shape, Data: halfRingSum(fs, d, n, a == "bf16")}}
	default: // randomk: the values
		vals := make([][]float32, n)
		for r := range n {
			vals[r] = f32sOf(fs[r].Parts[0].Data)
		}
		vs := RingSum(vals)
		R.ringVolume(v, len(vs), 4, true)
		f.Parts = []wire.Part{{Name: "values", DType: wire.F32, Shape: fs[0].Parts[0].Shape, Data: bytesOfF32(vs)}}
	}
	return decodeAll(&f)
}

// halfRingSum sums the ranks' half-precision data as the compressed ring
// does: chunk k in RingOrder(n, k), each hop's sum rounded to the half
// type again.
func halfRingSum(fs []*wire.Compressed, d, n int, bf bool) []byte {
	to, from := codec.F32ToF16, codec.F16ToF32
	if bf {
		to, from = codec.F32ToBF16, codec.BF16ToF32
	}
	hs := make([][]uint16, n)
	for r := range n {
		b := fs[r].Parts[0].Data
		hs[r] = make([]uint16, d)
		for i := range d {
			hs[r][i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
		}
	}
	res := make([]byte, 2*d)
	for k := range n {
		lo, hi := collective.Chunk(d, n, k)
		o := collective.RingOrder(n, k)
		for i := lo; i < hi; i++ {
			s := hs[o[0]][i]
			for _, j := range o[1:] {
				s = to(from(hs[j][i]) + from(s))
			}
			res[2*i], res[2*i+1] = byte(s), byte(s>>8)
		}
	}
	return res
}

// partitioned: Espresso's alltoall of compressed partitions, each decoded
// and summed by its owner, then allgathered — re-compressed
// (Partitioned), as the frames (A2AAG), or dense (A2ADense).
func (R *Ref) partitioned(us []*Unit, sp Spec, v Volume) ([]float32, error) {
	n, u0 := R.N, us[0]
	d := len(u0.Data)
	m := int(codec.PartLen(int64(d), n))
	fs := make([][]*wire.Compressed, n) // [rank][chunk]
	for r := range n {
		chunks, err := codec.Split(inputOf(us[r]), n)
		if err != nil {
			return nil, err
		}
		fs[r] = make([]*wire.Compressed, n)
		for c := range n {
			if fs[r][c], _, err = R.enc(r, sp, "", chunks[c]); err != nil {
				return nil, err
			}
			if c != r {
				v.add("alltoall", r, frameBytes(fs[r][c]))
			}
		}
	}
	res := make([]float32, d)
	gsizes := make([]int, n)
	for c := range n {
		acc := make([]float32, m)
		for p := range n {
			x, err := decodeAll(fs[p][c])
			if err != nil {
				return nil, err
			}
			addLoop(acc, x)
			gsizes[c] += frameBytes(fs[p][c])
		}
		lo, hi := chunkBounds(d, m, c)
		switch sp.Collective {
		case Partitioned:
			g, _, err := R.enc(c, sp, "ag", codec.Input{Name: codec.PartName(u0.Name, c, n), Step: u0.Step, Shape: []int64{int64(m)}, Data: acc})
			if err != nil {
				return nil, err
			}
			x, err := decodeAll(g)
			if err != nil {
				return nil, err
			}
			copy(res[lo:hi], x)
			gsizes[c] = frameBytes(g)
		case A2ADense:
			copy(res[lo:hi], acc)
			gsizes[c] = 4 * (hi - lo)
		default:
			copy(res[lo:hi], acc)
		}
	}
	R.agVolume(v, gsizes)
	return res, nil
}

// rsag: a dense ring reduce-scatter, then each rank's chunk compressed and
// allgathered.
func (R *Ref) rsag(us []*Unit, sp Spec, v Volume) ([]float32, error) {
	n, u0 := R.N, us[0]
	d := len(u0.Data)
	s := RingSum(datas(us))
	R.ringVolume(v, d, 4, false)
	res := make([]float32, d)
	sizes := make([]int, n)
	for k := range n {
		lo, hi := collective.Chunk(d, n, k)
		g, _, err := R.enc(k, sp, "", codec.Input{Name: codec.PartName(u0.Name, k, n), Step: u0.Step, Shape: []int64{int64(hi - lo)}, Data: s[lo:hi]})
		if err != nil {
			return nil, err
		}
		x, err := decodeAll(g)
		if err != nil {
			return nil, err
		}
		copy(res[lo:hi], x)
		sizes[k] = frameBytes(g)
	}
	R.agVolume(v, sizes)
	return res, nil
}

// powerSGD: PowerSGD's two allreduces (P, orthonormalized, then Q) with
// error feedback; a tensor that is not a matrix is summed dense.
func (R *Ref) powerSGD(us []*Unit, sp Spec, v Volume) ([]float32, error) {
	n := R.N
	d := len(us[0].Data)
	pl, err := codec.PowerSGDPlanFor(sp.Codec, us[0].shape())
	if err != nil {
		return nil, err
	}
	Ms := make([][]float32, n)
	mems := make([]codec.Memory, n)
	sts := make([]*codec.State, n)
	for r := range n {
		if err := codec.CheckFinite(us[r].Name, us[r].Data); err != nil {
			return nil, err
		}
		if mems[r], err = codec.NewMemory(sp.Memory, sp.MemOpts); err != nil {
			return nil, err
		}
		sts[r] = R.Stores[r].Get(us[r].Name)
		Ms[r] = slices.Clone(mems[r].Compensate(sts[r], us[r].Data))
	}
	none := &wire.Compressed{}
	if !pl.Matrix {
		for r := range n {
			mems[r].Update(sts[r], Ms[r], Ms[r], none)
		}
		R.ringVolume(v, d, 4, true)
		return RingSum(Ms), nil
	}
	Ps := make([][]float32, n)
	for r := range n {
		Ps[r] = pl.P(Ms[r], pl.WarmQ(us[r].Name, sts[r]))
	}
	P := RingSum(Ps)
	R.ringVolume(v, len(P), 4, true)
	pl.Orthonormalize(P)
	Qs := make([][]float32, n)
	for r := range n {
		Qs[r] = pl.Q(Ms[r], P)
		sent := make([]float32, d)
		pl.Decode(sent, P, Qs[r])
		mems[r].Update(sts[r], Ms[r], sent, none)
	}
	Q := RingSum(Qs)
	R.ringVolume(v, len(Q), 4, true)
	for r := range n {
		pl.SetQ(sts[r], Q)
	}
	out := make([]float32, d)
	pl.Decode(out, P, Q)
	return out, nil
}

func f32sOf(b []byte) []float32 {
	x := make([]float32, len(b)/4)
	for i := range x {
		x[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return x
}

func bytesOfF32(x []float32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}
