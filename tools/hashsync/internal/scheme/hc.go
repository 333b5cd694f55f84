package scheme

import (
	"fmt"
	"time"

	"trainwire.dev/lib/tensor"
)

// state is a partial sum during hierarchical centralization: sparse rows,
// or dense once the density made dense smaller.
type state struct {
	idx   []uint32
	val   []float32
	dense []float32 // non-nil once switched
}

func (s *Syncer) encodeState(st *state) message {
	if st.dense != nil {
		return message{fmt: fmtDense, n: uint64(len(st.dense)), body: tensor.AppendFloat32s(make([]byte, 0, 4*len(st.dense)), st.dense)}
	}
	body := tensor.AppendUint32s(make([]byte, 0, len(st.idx)*4+len(st.val)*4), st.idx)
	body = tensor.AppendFloat32s(body, st.val)
	return message{fmt: fmtCOO, n: uint64(len(st.idx)), body: body}
}

// syncHC is SparCML's SSAR_Recursive_double (hierarchical centralization):
// log2 n stages; at stage i each rank swaps its partial sum with rank
// r XOR 2^i and merges, summing equal rows (lower block + upper block, so
// both partners hold the same bits). A partial sum switches to dense when
// its COO would be larger than the dense tensor.
func (s *Syncer) syncHC(t *Tensor, st *Stats) (*Tensor, error) {
	w, rows := t.Width, t.Rows
	cur := &state{idx: t.Idx, val: t.Val}
	ph := s.phase("hc")
	t0 := time.Now()
	for mask := 1; mask < s.n; mask <<= 1 {
		partner := s.r ^ mask
		msg := s.encodeState(cur)
		got, err := s.exchange(ph, opHC, []int{partner}, func(int) message { return msg }, []int{partner},
			func(p int, f uint32, k uint64) (int, error) {
				switch {
				case f == fmtCOO && k <= uint64(rows):
					return int(k) * (4 + 4*w), nil
				case f == fmtDense && k == uint64(rows*w):
					return 4 * rows * w, nil
				}
				return 0, fmt.Errorf("format %d with %d entries for %d rows of width %d", f, k, rows, w)
			})
		if err != nil {
			return nil, err
		}
		m := got[partner]
		other := &state{}
		if m.fmt == fmtDense {
			other.dense = tensor.Float32sOrCopy(m.body)
		} else {
			k := int(m.n)
			other.idx, other.val = tensor.Uint32sOrCopy(m.body[:4*k]), tensor.Float32sOrCopy(m.body[4*k:])
			for i, x := range other.idx {
				if int64(x) >= int64(rows) || (i > 0 && x <= other.idx[i-1]) {
					err := &BadPeerError{Rank: partner, Phase: "hc", Err: fmt.Errorf("row %d (entry %d) out of range or not ascending", x, i)}
					s.m.Abort(err)
					return nil, err
				}
			}
		}
		lower, upper := cur, other
		if s.r&mask != 0 {
			lower, upper = other, cur
		}
		cur = mergeStates(lower, upper, rows, w)
	}
	st.Times["hc"] = time.Since(t0).Seconds()
	if cur.dense != nil {
		return FromDense(t.Name, cur.dense, rows, w), nil
	}
	return &Tensor{Name: t.Name, Rows: rows, Width: w, Idx: cur.idx, Val: cur.val}, nil
}

// mergeStates returns a + b.
func mergeStates(a, b *state, rows, w int) *state {
	if a.dense != nil || b.dense != nil {
		d := tensor.Alloc(rows * w)
		// a first, then b: the sum of two terms, the same bits in either order.
		for _, x := range []*state{a, b} {
			if x.dense != nil {
				addRow(d, x.dense)
				continue
			}
			for k, i := range x.idx {
				addRow(d[int(i)*w:int(i)*w+w], x.val[k*w:k*w+w])
			}
		}
		return &state{dense: d}
	}
	out := &state{idx: make([]uint32, 0, len(a.idx)+len(b.idx)), val: make([]float32, 0, len(a.val)+len(b.val))}
	i, j := 0, 0
	for i < len(a.idx) || j < len(b.idx) {
		switch {
		case j == len(b.idx) || (i < len(a.idx) && a.idx[i] < b.idx[j]):
			out.idx = append(out.idx, a.idx[i])
			out.val = append(out.val, a.val[i*w:i*w+w]...)
			i++
		case i == len(a.idx) || b.idx[j] < a.idx[i]:
			out.idx = append(out.idx, b.idx[j])
			out.val = append(out.val, b.val[j*w:j*w+w]...)
			j++
		default:
			out.idx = append(out.idx, a.idx[i])
			o := len(out.val)
			out.val = append(out.val, a.val[i*w:i*w+w]...)
			addRow(out.val[o:], b.val[j*w:j*w+w])
			i++
			j++
		}
	}
	// The dense switch: COO (index + row) no smaller than the dense tensor.
	if len(out.idx)*(4+4*w) >= 4*rows*w {
		d := tensor.Alloc(rows * w)
		for k, i := range out.idx {
			copyRow(d[int(i)*w:int(i)*w+w], out.val[k*w:k*w+w])
		}
		return &state{dense: d}
	}
	return out
}
