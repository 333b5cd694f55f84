package main

import (
	"encoding/binary"
	"fmt"
	"slices"

	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"

	"trainwire.dev/tools/hashsync/internal/scheme"
)

// form remembers how a tensor arrived, so the result leaves the same way.
type form struct {
	dense bool
	shape []int64
	step  int64
}

// toTensor converts a dense or sparse float32 frame into a row-sparse
// tensor. Dense frames are cut into rows of width rowWidth, or of their
// last dimension when rowWidth is 0 (1-D tensors: width 1).
func toTensor(f wire.Frame, rowWidth int) (*scheme.Tensor, form, error) {
	switch f := f.(type) {
	case *wire.Dense:
		if f.DType != wire.F32 {
			return nil, form{}, fmt.Errorf("dense tensor %q is %s: hashsync synchronizes f32", f.Name, f.DType)
		}
		numel, err := wire.Numel(f.Shape)
		if err != nil {
			return nil, form{}, err
		}
		w := rowWidth
		if w == 0 {
			w = 1
			if len(f.Shape) >= 2 && f.Shape[len(f.Shape)-1] > 0 {
				w = int(f.Shape[len(f.Shape)-1])
			}
		}
		if numel%int64(w) != 0 {
			return nil, form{}, fmt.Errorf("dense tensor %q: %d elements are not rows of %d (--row-width)", f.Name, numel, w)
		}
		if numel/int64(w) > 1<<32-1 {
			return nil, form{}, fmt.Errorf("dense tensor %q: %d rows: hashsync indexes rows with 32 bits", f.Name, numel/int64(w))
		}
		data, err := f.F32()
		if err != nil {
			return nil, form{}, err
		}
		t := scheme.FromDense(f.Name, data, int(numel/int64(w)), w)
		return t, form{dense: true, shape: f.Shape, step: f.Step}, nil
	case *wire.Sparse:
		if f.DType != wire.F32 {
			return nil, form{}, fmt.Errorf("sparse tensor %q is %s: hashsync synchronizes f32", f.Name, f.DType)
		}
		rows := f.Rows()
		if rows > 1<<32-1 {
			return nil, form{}, fmt.Errorf("sparse tensor %q: %d rows: hashsync indexes rows with 32 bits", f.Name, rows)
		}
		w := int(f.Width)
		// The values as a view of the frame's bytes where the build and
		// their alignment allow (as the dense path's f.F32()), else a copy.
		t := &scheme.Tensor{Name: f.Name, Rows: int(rows), Width: w, Idx: make([]uint32, f.Nnz), Val: tensor.Float32sOrCopy(f.Values)}
		switch f.Format {
		case wire.COO:
			for k := range t.Idx {
				if f.IType == wire.U32 {
					t.Idx[k] = binary.LittleEndian.Uint32(f.Indices[4*k:])
				} else {
					t.Idx[k] = uint32(binary.LittleEndian.Uint64(f.Indices[8*k:])) // < rows: checked by the reader
				}
			}
			if !slices.IsSorted(t.Idx) {
				sortTensor(t)
			}
			for k := 1; k < len(t.Idx); k++ {
				if t.Idx[k] == t.Idx[k-1] {
					return nil, form{}, fmt.Errorf("sparse tensor %q: row %d listed twice", f.Name, t.Idx[k])
				}
			}
		case wire.Bitmap:
			k := 0
			for i, b := range f.Indices {
				for bit := range 8 {
					if b>>bit&1 != 0 {
						t.Idx[k] = uint32(i*8 + bit)
						k++
					}
				}
			}
		}
		return t, form{shape: f.Shape, step: f.Step}, nil
	}
	return nil, form{}, fmt.Errorf("%s frame: hashsync reads dense and sparse tensor frames", f.Type())
}

func sortTensor(t *scheme.Tensor) {
	w := t.Width
	perm := make([]int, len(t.Idx))
	for i := range perm {
		perm[i] = i
	}
	slices.SortStableFunc(perm, func(a, b int) int { return int(int64(t.Idx[a]) - int64(t.Idx[b])) })
	idx := make([]uint32, len(perm))
	val := make([]float32, len(t.Val))
	for k, p := range perm {
		idx[k] = t.Idx[p]
		copy(val[k*w:k*w+w], t.Val[p*w:p*w+w])
	}
	t.Idx, t.Val = idx, val
}

// denseBuf is a reusable dense output: the rows written last time are
// cleared, not the whole buffer, so a sparse result becomes dense in
// O(rows present), not O(|G|) of fresh memory per tensor.
type denseBuf struct {
	d    []float32
	prev []uint32
	w    int
}

// take returns the buffer for a rows×width result, zeroed: the rows
// written last time are cleared (the whole buffer the first time).
func (b *denseBuf) take(rows, width int) []float32 {
	if len(b.d) != rows*width || b.w != width {
		b.d, b.prev, b.w = tensor.Alloc(rows*width), nil, width
	}
	for _, i := range b.prev {
		clear(b.d[int(i)*b.w : int(i)*b.w+b.w])
	}
	b.prev = b.prev[:0]
	return b.d
}

// toFrame converts a result back into the form its input had. buf, when
// not nil, is reused for dense results (the frame then views it: write
// the frame before the next call).
func toFrame(t *scheme.Tensor, fm form, rank int, buf ...*denseBuf) wire.Frame {
	if t.DenseVal != nil && !fm.dense {
		// A dense result asked for as sparse: gather its rows.
		t = scheme.FromDense(t.Name, t.DenseVal, t.Rows, t.Width)
	}
	if fm.dense {
		d := t.DenseVal
		if d == nil {
			if len(buf) > 0 && buf[0] != nil {
				d = buf[0].take(t.Rows, t.Width)
				buf[0].prev = append(buf[0].prev[:0], t.Idx...)
			} else {
				d = tensor.Alloc(t.Rows * t.Width)
			}
			t.ScatterInto(d)
		}
		f := wire.NewDenseF32(t.Name, d, fm.shape...)
		f.Step, f.Rank = fm.step, int64(rank)
		return f
	}
	return sparseFrame(t, fm.shape, fm.step, rank)
}

// sparseFrame is t as a COO frame (u32 row indices, ascending).
func sparseFrame(t *scheme.Tensor, shape []int64, step int64, rank int) *wire.Sparse {
	if shape == nil {
		shape = []int64{int64(t.Rows), int64(t.Width)}
		if t.Width == 1 {
			shape = []int64{int64(t.Rows)}
		}
	}
	// Views of the result's memory on little-endian hosts (no copy), the
	// little-endian bytes elsewhere; never nil, as the frame requires.
	idx := []byte{}
	if len(t.Idx) > 0 {
		idx = tensor.Uint32Bytes(t.Idx)
	}
	val := []byte{}
	if len(t.Val) > 0 {
		val = tensor.Bytes(t.Val)
	}
	return &wire.Sparse{Name: t.Name, Step: step, Rank: int64(rank), DType: wire.F32, Shape: shape, Width: int64(t.Width),
		Format: wire.COO, IType: wire.U32, Nnz: int64(len(t.Idx)), Indices: idx, Values: val}
}
