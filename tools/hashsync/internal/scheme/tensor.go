// Package scheme synchronizes row-sparse float32 tensors among the ranks of
// a mesh with Zen's balanced parallelism and every baseline scheme: each
// rank passes its gradient, each gets the sum over all ranks.
package scheme

import (
	"fmt"
	"math/bits"

	"trainwire.dev/lib/tensor"
)

// Tensor is a row-sparse float32 tensor: Rows rows of Width elements, of
// which the rows Idx (ascending, unique) are present with values Val
// (len(Idx)·Width, row after row). Element-level COO is Width 1.
type Tensor struct {
	Name  string
	Rows  int
	Width int
	Idx   []uint32
	Val   []float32
	// DenseVal, when not nil, holds the values instead of Val: a Rows·Width
	// buffer the caller passed as Prepared.DenseOut; Idx then lists the
	// rows written, in no particular order.
	DenseVal []float32
}

// Nnz is the number of present rows.
func (t *Tensor) Nnz() int { return len(t.Idx) }

// Row returns the values of the k-th present row.
func (t *Tensor) Row(k int) []float32 { return t.Val[k*t.Width : (k+1)*t.Width] }

// Check validates the shape, ordering and bounds of t.
func (t *Tensor) Check() error {
	if t.Width < 1 || t.Rows < 0 {
		return fmt.Errorf("tensor %q: %d rows of width %d", t.Name, t.Rows, t.Width)
	}
	if len(t.Val) != len(t.Idx)*t.Width {
		return fmt.Errorf("tensor %q: %d values for %d rows of width %d", t.Name, len(t.Val), len(t.Idx), t.Width)
	}
	for k, i := range t.Idx {
		if int64(i) >= int64(t.Rows) {
			return fmt.Errorf("tensor %q: row index %d (entry %d) outside [0, %d)", t.Name, i, k, t.Rows)
		}
		if k > 0 && i <= t.Idx[k-1] {
			return fmt.Errorf("tensor %q: row indices not strictly ascending at entry %d (%d after %d)", t.Name, k, i, t.Idx[k-1])
		}
	}
	return nil
}

// FromDense returns the rows of dense (rows·width elements) that have a
// non-zero element.
func FromDense(name string, dense []float32, rows, width int) *Tensor {
	t := &Tensor{Name: name, Rows: rows, Width: width}
	for r := range rows {
		row := dense[r*width : (r+1)*width]
		if nonzero(row) {
			t.Idx = append(t.Idx, uint32(r))
			t.Val = append(t.Val, row...)
		}
	}
	return t
}

// Dense returns t as a dense rows·width slice.
func (t *Tensor) Dense() []float32 {
	d := make([]float32, t.Rows*t.Width)
	t.ScatterInto(d)
	return d
}

// ScatterInto writes t's rows into dense.
func (t *Tensor) ScatterInto(dense []float32) {
	w := t.Width
	for k, i := range t.Idx {
		copy(dense[int(i)*w:int(i)*w+w], t.Val[k*w:k*w+w])
	}
}

// Compact drops the present rows whose values are all zero (sums that
// cancelled), so every scheme's sparse result lists the same rows: those
// with a non-zero element in the sum.
func (t *Tensor) Compact() {
	w, o := t.Width, 0
	for k, i := range t.Idx {
		row := t.Val[k*w : k*w+w]
		if nonzero(row) {
			if o != k {
				t.Idx[o] = i
				copy(t.Val[o*w:o*w+w], row)
			}
			o++
		}
	}
	t.Idx, t.Val = t.Idx[:o], t.Val[:o*w]
}

func nonzero(row []float32) bool {
	for _, v := range row {
		if v != 0 {
			return true
		}
	}
	return false
}

// Scale multiplies every value by a.
func (t *Tensor) Scale(a float32) {
	for i := range t.Val {
		t.Val[i] *= a
	}
}

// list is one sorted run of rows: indices and their values.
type list struct {
	idx []uint32
	val []float32
}

// merger places runs of rows with pairwise disjoint indices, each
// ascending, into one ascending tensor. It marks the rows present in a
// bitmap over all rows and takes prefix popcounts per 64-row word, so it
// knows every row's place in the output from the indices alone: each run's
// values can then be copied straight into place, O(total + rows/64),
// however finely the runs interleave (hash partitions interleave row by
// row), and runs whose values are still on the wire can be placed when
// they land.
type merger struct {
	t      *Tensor
	words  []uint64
	prefix []int32
}

// newMerger lays out the output of runs, of which only the indices are
// read. It fails if two runs share a row. The values come from pool when
// it is not nil (every one is written by place).
func newMerger(name string, rows, width int, runs []list, pool *tensor.Pool) (*merger, error) {
	total := 0
	for _, r := range runs {
		total += len(r.idx)
	}
	var val []float32
	if pool != nil {
		val = getResult(pool, total*width)
	} else {
		val = make([]float32, total*width)
	}
	m := &merger{
		t:      &Tensor{Name: name, Rows: rows, Width: width, Idx: make([]uint32, total), Val: val},
		words:  make([]uint64, (rows+63)/64),
		prefix: make([]int32, (rows+63)/64),
	}
	for _, r := range runs {
		for _, i := range r.idx {
			m.words[i>>6] |= 1 << (i & 63)
		}
	}
	acc := int32(0)
	for k, w := range m.words {
		m.prefix[k] = acc
		acc += int32(bits.OnesCount64(w))
	}
	if int(acc) != total {
		return nil, fmt.Errorf("merging %d rows of which only %d are distinct", total, acc)
	}
	return m, nil
}

// place copies run r (one of those the merger was made with) into its
// places. Distinct runs may be placed concurrently.
func (m *merger) place(r list) {
	width, t := m.t.Width, m.t
	for k, i := range r.idx {
		w := m.words[i>>6] & (1<<(i&63) - 1)
		at := int(m.prefix[i>>6]) + bits.OnesCount64(w)
		t.Idx[at] = i
		copy(t.Val[at*width:at*width+width], r.val[k*width:k*width+width])
	}
}
