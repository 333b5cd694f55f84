package scheme

import (
	"fmt"
	"math"
	"slices"
	"time"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/tensor"
)

// syncHiTopK is HiTopKComm (seed-topk.md §2): ranks are m nodes of L =
// LocalSize ranks (rank = i·L + j). Step 1, an intra-node reduce-scatter
// of the dense tensor by row segments (segment j to local rank j, summed
// in local-rank order); step 2, the top ρ·rows(seg) rows by L2 norm of
// the node sum plus the error-feedback residual (ρ = 0 keeps every
// non-zero row: lossless); step 3, an all-gather of (index, row) among the
// m ranks of stream j, summed in node order; step 4, an intra-node
// all-gather of the aggregated segments, each sent sparse when COO is
// smaller than dense.
func (s *Syncer) syncHiTopK(t *Tensor, st *Stats) (*Tensor, error) {
	L := s.cfg.LocalSize
	m := s.n / L
	node, j := s.r/L, s.r%L
	w, rows := t.Width, t.Rows
	seg := func(j int) (int, int) { return collective.Chunk(rows, L, j) }
	lo, hi := seg(j)
	segRows := hi - lo
	intra := make([]int, 0, L-1)
	for q := range L {
		if q != j {
			intra = append(intra, node*L+q)
		}
	}
	stream := make([]int, 0, m-1)
	for p := range m {
		if p != node {
			stream = append(stream, p*L+j)
		}
	}
	t0 := time.Now()

	// Step 1: segment q of the local dense tensor goes to local rank q.
	rowsOf := func(q int) []float32 {
		a, b := seg(q)
		d := tensor.Alloc((b - a) * w)
		for k, i := range t.Idx {
			if int(i) >= a && int(i) < b {
				copy(d[(int(i)-a)*w:(int(i)-a+1)*w], t.Val[k*w:k*w+w])
			}
		}
		return d
	}
	acc := rowsOf(j)
	if L > 1 {
		got, err := s.exchange(s.phase("intra-rs"), opIntraRS, intra,
			func(p int) message {
				d := rowsOf(p % L)
				return message{fmt: fmtDense, n: uint64(len(d)), body: tensor.AppendFloat32s(nil, d)}
			}, intra,
			func(p int, f uint32, k uint64) (int, error) {
				if f != fmtDense || k != uint64(segRows*w) {
					return 0, fmt.Errorf("reduce-scatter: format %d with %d values for a segment of %d", f, k, segRows*w)
				}
				return 4 * segRows * w, nil
			})
		if err != nil {
			return nil, err
		}
		// Sum in local-rank order, from 0.
		sum := tensor.Alloc(segRows * w)
		for q := range L {
			if q == j {
				addRow(sum, acc)
			} else {
				addRow(sum, tensor.Float32sOrCopy(got[node*L+q].body))
			}
		}
		acc = sum
	}
	t1 := time.Now()
	st.Times["intra-rs"] = t1.Sub(t0).Seconds()

	// Step 2: selection with error feedback.
	if s.cfg.Rho > 0 {
		key := fmt.Sprintf("%s/%d", t.Name, j)
		res := s.residual[key]
		if len(res) != len(acc) {
			res = make([]float32, len(acc))
			s.residual[key] = res
		}
		addRow(acc, res)
	}
	var sel []int32
	for r := range segRows {
		if nonzero(acc[r*w : r*w+w]) {
			sel = append(sel, int32(r))
		}
	}
	if s.cfg.Rho > 0 {
		k := max(1, int(math.Floor(s.cfg.Rho*float64(segRows))))
		if len(sel) > k {
			norm := func(r int32) float64 {
				v := 0.0
				for _, x := range acc[int(r)*w : int(r)*w+w] {
					v += float64(x) * float64(x)
				}
				return v
			}
			slices.SortStableFunc(sel, func(a, b int32) int {
				na, nb := norm(a), norm(b)
				if na > nb {
					return -1
				}
				if na < nb {
					return 1
				}
				return int(a - b)
			})
			sel = sel[:k]
			slices.Sort(sel)
		}
		// The residual keeps what was not sent.
		res := s.residual[fmt.Sprintf("%s/%d", t.Name, j)]
		copy(res, acc)
		for _, r := range sel {
			clear(res[int(r)*w : int(r)*w+w])
		}
	}
	idx := make([]uint32, len(sel))
	val := make([]float32, len(sel)*w)
	for k, r := range sel {
		idx[k] = uint32(lo + int(r))
		copy(val[k*w:k*w+w], acc[int(r)*w:int(r)*w+w])
	}
	t2 := time.Now()
	st.Times["select"] = t2.Sub(t1).Seconds()

	// Step 3: all-gather among the m ranks of stream j; sum in node order.
	mine := tensor.AppendFloat32s(tensor.AppendUint32s(make([]byte, 0, len(idx)*(4+4*w)), idx), val)
	agg := tensor.Alloc(segRows * w)
	touched := make([]bool, segRows)
	add := func(p int, idx []uint32, val []float32) error {
		for k, i := range idx {
			if int(i) < lo || int(i) >= hi || (k > 0 && i <= idx[k-1]) {
				return &BadPeerError{Rank: p, Phase: "inter-ag", Err: fmt.Errorf("row %d (entry %d) outside segment [%d, %d) or not ascending", i, k, lo, hi)}
			}
			o := int(i) - lo
			touched[o] = true
			addRow(agg[o*w:o*w+w], val[k*w:k*w+w])
		}
		return nil
	}
	var got []message
	if m > 1 {
		var err error
		got, err = s.exchange(s.phase("inter-ag"), opInterAG, stream, func(int) message { return message{fmt: fmtCOO, n: uint64(len(idx)), body: mine} }, stream,
			func(p int, f uint32, k uint64) (int, error) {
				if f != fmtCOO || k > uint64(segRows) {
					return 0, fmt.Errorf("all-gather: format %d with %d rows for a segment of %d", f, k, segRows)
				}
				return int(k) * (4 + 4*w), nil
			})
		if err != nil {
			return nil, err
		}
	}
	for p := range m {
		var err error
		if p == node {
			err = add(s.r, idx, val)
		} else {
			msg := got[p*L+j]
			k := int(msg.n)
			err = add(p*L+j, tensor.Uint32sOrCopy(msg.body[:4*k]), tensor.Float32sOrCopy(msg.body[4*k:]))
		}
		if err != nil {
			s.m.Abort(err)
			return nil, err
		}
	}
	var oi []uint32
	var ov []float32
	for o, tb := range touched {
		if tb && nonzero(agg[o*w:o*w+w]) {
			oi = append(oi, uint32(lo+o))
			ov = append(ov, agg[o*w:o*w+w]...)
		}
	}
	t3 := time.Now()
	st.Times["inter-ag"] = t3.Sub(t2).Seconds()

	// Step 4: intra-node all-gather of the aggregated segments.
	runs := make([]list, L)
	runs[j] = list{idx: oi, val: ov}
	if L > 1 {
		var msg message
		if len(oi)*(4+4*w) < 4*segRows*w {
			msg = message{fmt: fmtCOO, n: uint64(len(oi)), body: tensor.AppendFloat32s(tensor.AppendUint32s(nil, oi), ov)}
		} else {
			msg = message{fmt: fmtDense, n: uint64(segRows * w), body: tensor.AppendFloat32s(nil, agg)}
		}
		got, err := s.exchange(s.phase("intra-ag"), opIntraAG, intra, func(int) message { return msg }, intra,
			func(p int, f uint32, k uint64) (int, error) {
				a, b := seg(p % L)
				switch {
				case f == fmtCOO && k <= uint64(b-a):
					return int(k) * (4 + 4*w), nil
				case f == fmtDense && k == uint64((b-a)*w):
					return 4 * (b - a) * w, nil
				}
				return 0, fmt.Errorf("all-gather: format %d with %d entries", f, k)
			})
		if err != nil {
			return nil, err
		}
		for q := range L {
			if q == j {
				continue
			}
			p := node*L + q
			msg := got[p]
			a, b := seg(q)
			if msg.fmt == fmtDense {
				d := tensor.Float32sOrCopy(msg.body)
				tt := FromDense(t.Name, d, b-a, w)
				for k := range tt.Idx {
					tt.Idx[k] += uint32(a)
				}
				runs[q] = list{idx: tt.Idx, val: tt.Val}
				continue
			}
			k := int(msg.n)
			l := list{idx: tensor.Uint32sOrCopy(msg.body[:4*k]), val: tensor.Float32sOrCopy(msg.body[4*k:])}
			for e, i := range l.idx {
				if int(i) < a || int(i) >= b || (e > 0 && i <= l.idx[e-1]) {
					err := &BadPeerError{Rank: p, Phase: "intra-ag", Err: fmt.Errorf("row %d outside segment [%d, %d) or not ascending", i, a, b)}
					s.m.Abort(err)
					return nil, err
				}
			}
			runs[q] = l
		}
	}
	out := &Tensor{Name: t.Name, Rows: rows, Width: w}
	for _, r := range runs {
		out.Idx = append(out.Idx, r.idx...)
		out.Val = append(out.Val, r.val...)
	}
	st.Times["intra-ag"] = time.Since(t3).Seconds()
	return out, nil
}
