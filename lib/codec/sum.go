package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// ErrNotSummable is wrapped by Sum's error for frames whose codec cannot
// be added without decoding.
var ErrNotSummable = fmt.Errorf("not summable without decoding")

// Sum adds compressed frames of one tensor without decoding them, where
// the codec's math allows (see Info.Summable):
//
//   - randomk: frames with the same name, step and params share their
//     indices; the values add. Result: a randomk frame.
//   - fp16, bf16: element-wise sum in f32, rounded once. Result: same codec.
//   - powersgd: frames with bit-identical P; the Q parts add (vectors:
//     the data adds). Result: a powersgd frame.
//   - signsgd, signum: majority vote, bit = (Σ ±1 ≥ 0). Result: same codec.
//   - topk, mstopk, dgc, threshold: the union of the indices with the
//     values of equal indices added, in frame order. Result: a sparse COO
//     frame (u32 indices, f32 values).
//   - hitopk: the same on rows: a row-sparse COO frame of the rows'
//     width.
//
// Every frame must be valid for its codec (FromFrame), of the same algo,
// name, shape and params; frames of other codecs give ErrNotSummable.
func Sum(fs []*wire.Compressed) (wire.Frame, error) { return SumWith(fs, SumOptions{}) }

// SumOptions changes what Sum computes.
type SumOptions struct {
	// Average divides the sum by the number of frames n: the f32
	// accumulator (values, Q, data, COO values, or the f32 sum of the
	// halves) is divided by float32(n) once, after the whole sum, and
	// only then rounded to the codec's type. Majority votes (signsgd,
	// signum) are scale-free: their bits are the same either way.
	Average bool
}

// SumWith is Sum with options.
func SumWith(fs []*wire.Compressed, o SumOptions) (wire.Frame, error) {
	if len(fs) == 0 {
		return nil, fmt.Errorf("codec: sum of no frames")
	}
	f0 := fs[0]
	for i, f := range fs {
		if _, err := FromFrame(f); err != nil {
			return nil, fmt.Errorf("codec: sum: frame %d: %w", i, err)
		}
		if f.Algo != f0.Algo {
			return nil, fmt.Errorf("codec: sum: frame %d is %q, frame 0 %q: %w", i, f.Algo, f0.Algo, ErrWrongAlgo)
		}
		if f.Name != f0.Name || !slices.Equal(f.Shape, f0.Shape) {
			return nil, fmt.Errorf("codec: sum: frame %d is %q %v, frame 0 %q %v", i, f.Name, f.Shape, f0.Name, f0.Shape)
		}
		if !reflect.DeepEqual(f.Params, f0.Params) {
			return nil, fmt.Errorf("codec: sum: frame %d has params %v, frame 0 %v", i, f.Params, f0.Params)
		}
	}
	// avg divides an accumulator by n when averaging.
	avg := func(acc []float32) []float32 {
		if o.Average {
			n := float32(len(fs))
			for i := range acc {
				acc[i] /= n
			}
		}
		return acc
	}
	out := &wire.Compressed{Name: f0.Name, Step: f0.Step, Rank: -1, Algo: f0.Algo,
		Params: maps.Clone(f0.Params), DType: f0.DType, Shape: slices.Clone(f0.Shape)}
	switch f0.Algo {
	case "randomk":
		for i, f := range fs {
			if f.Step != f0.Step {
				return nil, fmt.Errorf("codec: sum: randomk frame %d is step %d, frame 0 step %d: indices differ", i, f.Step, f0.Step)
			}
		}
		acc := avg(sumF32(fs, 0))
		out.Parts = []wire.Part{part("values", wire.F32, f32bytes(acc), int64(len(acc)))}
		return out, nil
	case "fp16", "bf16":
		c, _ := FromFrame(f0)
		h := c.(*half)
		out.Parts = []wire.Part{part("data", h.dt, sumHalves(h, fs, o.Average), int64(len(f0.Parts[0].Data)/2))}
		return out, nil
	case "powersgd":
		if len(f0.Parts) == 1 {
			acc := avg(sumF32(fs, 0))
			out.Parts = []wire.Part{part("data", wire.F32, f32bytes(acc), int64(len(acc)))}
			return out, nil
		}
		for i, f := range fs {
			if !bytes.Equal(f.Parts[0].Data, f0.Parts[0].Data) {
				return nil, fmt.Errorf("codec: sum: powersgd frame %d has another P: only frames sharing P (after its allreduce) add: %w", i, ErrNotSummable)
			}
		}
		acc := avg(sumF32(fs, 1))
		p := f0.Parts[0]
		out.Parts = []wire.Part{part("p", wire.F32, slices.Clone(p.Data), p.Shape...),
			part("q", wire.F32, f32bytes(acc), f0.Parts[1].Shape...)}
		return out, nil
	case "signsgd", "signum":
		d, _ := numel(f0.Shape)
		votes := make([]int32, d)
		for _, f := range fs {
			b := f.Parts[0].Data
			for i := range votes {
				if b[i/8]&(0x80>>(i%8)) != 0 {
					votes[i]++
				} else {
					votes[i]--
				}
			}
		}
		b := make([]byte, packedLen(d))
		for i, v := range votes {
			if v >= 0 {
				b[i/8] |= 0x80 >> (i % 8)
			}
		}
		out.Parts = []wire.Part{part("bits", wire.U8, b, int64(len(b)))}
		return out, nil
	case "hitopk":
		return sumRows(fs, avg), nil
	case "topk", "mstopk", "dgc", "threshold":
		acc := map[uint32]float32{}
		for _, f := range fs {
			vals := f32s(f.Parts[0].Data)
			idx := tensor.Uint32sOrCopy(f.Parts[1].Data)
			for j, i := range idx {
				acc[i] += vals[j]
			}
		}
		idx := slices.Sorted(maps.Keys(acc))
		vals := make([]float32, len(idx))
		for j, i := range idx {
			vals[j] = acc[i]
		}
		avg(vals)
		return &wire.Sparse{Name: f0.Name, Step: f0.Step, Rank: -1, DType: wire.F32, Shape: slices.Clone(f0.Shape),
			Width: 1, Format: wire.COO, IType: wire.U32, Nnz: int64(len(idx)),
			Indices: u32bytes(idx), Values: f32bytes(vals)}, nil
	}
	return nil, fmt.Errorf("codec: sum: %q: %w", f0.Algo, ErrNotSummable)
}

func sumF32(fs []*wire.Compressed, p int) []float32 {
	acc := make([]float32, len(fs[0].Parts[p].Data)/4)
	for _, f := range fs {
		for i, v := range f32s(f.Parts[p].Data) {
			acc[i] += v
		}
	}
	return acc
}

// sumHalves adds fp16 or bf16 frames (the frames in order, element by
// element, in float32; then ÷ n when averaging) and rounds the sums back
// to halves. Chunks run in parallel, each decoding a block of every
// frame with the vector decoders and encoding with the vector encoders;
// a chunk whose sums are not all finite (a sum past ±65504 is ±Inf in
// fp16, as the encoder's rule says) is rounded by the scalar conversion
// instead, which the vector kernels equal wherever they accept.
func sumHalves(h *half, fs []*wire.Compressed, average bool) []byte {
	d := len(fs[0].Parts[0].Data) / 2
	dec, enc := f16Decode, f16Into
	if h.dt == wire.BF16 {
		dec, enc = bf16Decode, bf16Into
	}
	out := allocBytes(2 * d)
	n := float32(len(fs))
	parallel(chunks(d, workers(0, d), 64), func(_ int, lo, hi int) {
		const block = 2048
		var acc, tmp [block]float32
		for i := lo; i < hi; i += block {
			m := min(block, hi-i)
			a := acc[:m]
			clear(a)
			for _, f := range fs {
				t := tmp[:m]
				dec(t, f.Parts[0].Data[2*i:2*(i+m)])
				for j, v := range t {
					a[j] += v
				}
			}
			if average {
				for j := range a {
					a[j] /= n
				}
			}
			if !enc(out[2*i:2*(i+m)], a) {
				for j, v := range a {
					binary.LittleEndian.PutUint16(out[2*(i+j):], h.to(v))
				}
			}
		}
	})
	return out
}

// sumRows adds hitopk frames: the union of their row indices, ascending,
// with the rows of equal indices added in frame order.
func sumRows(fs []*wire.Compressed, avg func([]float32) []float32) *wire.Sparse {
	f0 := fs[0]
	_, w := rowsOf(f0.Shape)
	acc := map[uint32][]float32{}
	for _, f := range fs {
		vals := f32s(f.Parts[0].Data)
		for j, r := range tensor.Uint32sOrCopy(f.Parts[1].Data) {
			row := acc[r]
			if row == nil {
				row = make([]float32, w)
				acc[r] = row
			}
			for e, v := range vals[int64(j)*w : int64(j+1)*w] {
				row[e] += v
			}
		}
	}
	idx := slices.Sorted(maps.Keys(acc))
	vals := make([]float32, 0, int64(len(idx))*w)
	for _, r := range idx {
		vals = append(vals, acc[r]...)
	}
	avg(vals)
	return &wire.Sparse{Name: f0.Name, Step: f0.Step, Rank: -1, DType: wire.F32, Shape: slices.Clone(f0.Shape),
		Width: w, Format: wire.COO, IType: wire.U32, Nnz: int64(len(idx)),
		Indices: u32bytes(idx), Values: f32bytes(vals)}
}

// AddHalves sets dst to dst ⊕ src for two fp16 (bf16 when bf16 is set)
// little-endian blocks of equal length: each pair decoded to float32
// (exact), added, and the sum rounded back to the half type as the
// encoder rounds (nearest, ties to even; an fp16 sum past ±65504 is ±Inf,
// as the scalar cast gives). One pass in cache-sized blocks with the
// vector conversions, in parallel: a compressed ring's ⊕ at every hop,
// with no allocation.
func AddHalves(dst, src []byte, bf16 bool) {
	d := len(dst) / 2
	dec, enc, to := f16Decode, f16Into, F32ToF16
	if bf16 {
		dec, enc, to = bf16Decode, bf16Into, F32ToBF16
	}
	parallel(chunks(d, workers(0, d), 64), func(_ int, lo, hi int) {
		const block = 2048
		var a, b [block]float32
		for i := lo; i < hi; i += block {
			m := min(block, hi-i)
			x, y := a[:m], b[:m]
			dec(x, dst[2*i:2*(i+m)])
			dec(y, src[2*i:2*(i+m)])
			for j, v := range y {
				x[j] += v
			}
			if !enc(dst[2*i:2*(i+m)], x) {
				for j, v := range x {
					binary.LittleEndian.PutUint16(dst[2*(i+j):], to(v))
				}
			}
		}
	})
}
