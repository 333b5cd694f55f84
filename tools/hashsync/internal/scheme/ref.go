package scheme

import "fmt"

// Reference is the dense reference sum of the ranks' tensors, summed in
// rank order from 0 (acc = 0; acc += G_0; acc += G_1; …), as every
// rank-ordered scheme sums; rows whose sum is zero are dropped.
func Reference(ts []*Tensor) (*Tensor, error) {
	if len(ts) == 0 {
		return nil, fmt.Errorf("reference: no tensors")
	}
	t0 := ts[0]
	acc := make([]float32, t0.Rows*t0.Width)
	w := t0.Width
	for r, t := range ts {
		if t.Rows != t0.Rows || t.Width != t0.Width || t.Name != t0.Name {
			return nil, fmt.Errorf("reference: rank %d has tensor %q with %d rows of width %d, rank 0 has %q with %d rows of width %d",
				r, t.Name, t.Rows, t.Width, t0.Name, t0.Rows, t0.Width)
		}
		if err := t.Check(); err != nil {
			return nil, fmt.Errorf("reference: rank %d: %w", r, err)
		}
		for k, i := range t.Idx {
			addRow(acc[int(i)*w:int(i)*w+w], t.Val[k*w:k*w+w])
		}
	}
	return FromDense(t0.Name, acc, t0.Rows, w), nil
}
