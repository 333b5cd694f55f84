// Package scheme synchronizes row-sparse float32 tensors among the ranks of
// a mesh with Zen's balanced parallelism and every baseline scheme: each
// rank passes its gradient, each gets the sum over all ranks.
package scheme

import "fmt"

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

	// compact is set by whoever built the tensor and saw no all-zero row
	// in it (the merger, as it placed every row): the next Compact then
	// has nothing to drop and skips its pass over the values.
	compact bool
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
		copyRow(dense[int(i)*w:int(i)*w+w], t.Val[k*w:k*w+w])
	}
}

// Compact drops the present rows whose values are all zero (sums that
// cancelled), so every scheme's sparse result lists the same rows: those
// with a non-zero element in the sum.
func (t *Tensor) Compact() {
	if t.compact {
		t.compact = false // once: the values are the caller's from here on
		return
	}
	w, o := t.Width, 0
	for k, i := range t.Idx {
		row := t.Val[k*w : k*w+w]
		if nonzero(row) {
			if o != k {
				t.Idx[o] = i
				copyRow(t.Val[o*w:o*w+w], row)
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
