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
	h := s.newHiTopK(t)
	t0 := time.Now()
	acc, err := h.reduceScatter()
	if err != nil {
		return nil, err
	}
	t1 := time.Now()
	st.Times["intra-rs"] = t1.Sub(t0).Seconds()
	idx, val := h.selectRows(acc)
	t2 := time.Now()
	st.Times["select"] = t2.Sub(t1).Seconds()
	agg, oi, ov, err := h.interAllGather(idx, val)
	if err != nil {
		return nil, err
	}
	t3 := time.Now()
	st.Times["inter-ag"] = t3.Sub(t2).Seconds()
	runs, err := h.intraAllGather(agg, oi, ov)
	if err != nil {
		return nil, err
	}
	out := &Tensor{Name: t.Name, Rows: t.Rows, Width: t.Width}
	for _, r := range runs {
		out.Idx = append(out.Idx, r.idx...)
		out.Val = append(out.Val, r.val...)
	}
	st.Times["intra-ag"] = time.Since(t3).Seconds()
	return out, nil
}

// hiTopK is one tensor's trip through syncHiTopK on this rank: local rank
// j of node node, owning row segment [lo, hi).
type hiTopK struct {
	s       *Syncer
	t       *Tensor
	L, m    int // ranks per node, nodes
	node, j int
	w       int
	lo, hi  int
	segRows int
	intra   []int // the other ranks of this node
	stream  []int // the other nodes' local rank j
}

func (s *Syncer) newHiTopK(t *Tensor) *hiTopK {
	L := s.cfg.LocalSize
	h := &hiTopK{s: s, t: t, L: L, m: s.n / L, node: s.r / L, j: s.r % L, w: t.Width}
	h.lo, h.hi = h.seg(h.j)
	h.segRows = h.hi - h.lo
	for q := range L {
		if q != h.j {
			h.intra = append(h.intra, h.node*L+q)
		}
	}
	for p := range h.m {
		if p != h.node {
			h.stream = append(h.stream, p*L+h.j)
		}
	}
	return h
}

// seg is local rank q's row segment.
func (h *hiTopK) seg(q int) (int, int) { return collective.Chunk(h.t.Rows, h.L, q) }

// rowsOf is segment q of the local tensor, dense.
func (h *hiTopK) rowsOf(q int) []float32 {
	a, b := h.seg(q)
	w := h.w
	d := tensor.Alloc((b - a) * w)
	for k, i := range h.t.Idx {
		if int(i) >= a && int(i) < b {
			copyRow(d[(int(i)-a)*w:(int(i)-a+1)*w], h.t.Val[k*w:k*w+w])
		}
	}
	return d
}

// reduceScatter is step 1: segment q of the local dense tensor goes to
// local rank q, which sums its segment in local-rank order, from 0.
func (h *hiTopK) reduceScatter() ([]float32, error) {
	acc := h.rowsOf(h.j)
	if h.L == 1 {
		return acc, nil
	}
	s, n := h.s, h.segRows*h.w
	got, err := s.exchange(s.phase("intra-rs"), opIntraRS, h.intra,
		func(p int) message {
			d := h.rowsOf(p % h.L)
			return message{fmt: fmtDense, n: uint64(len(d)), body: tensor.AppendFloat32s(nil, d)}
		}, h.intra,
		func(p int, f uint32, k uint64) (int, error) {
			if f != fmtDense || k != uint64(n) {
				return 0, fmt.Errorf("reduce-scatter: format %d with %d values for a segment of %d", f, k, n)
			}
			return 4 * n, nil
		})
	if err != nil {
		return nil, err
	}
	sum := tensor.Alloc(n)
	for q := range h.L {
		if q == h.j {
			addRow(sum, acc)
		} else {
			addRow(sum, tensor.Float32sOrCopy(got[h.node*h.L+q].body))
		}
	}
	return sum, nil
}

// selectRows is step 2: the top ρ·rows(seg) rows of acc plus the
// error-feedback residual by L2 norm (ρ = 0: every non-zero row), as
// global row indices and their values; the residual keeps what was not
// sent.
func (h *hiTopK) selectRows(acc []float32) ([]uint32, []float32) {
	s, w := h.s, h.w
	var res []float32
	if s.cfg.Rho > 0 {
		key := fmt.Sprintf("%s/%d", h.t.Name, h.j)
		res = s.residual[key]
		if len(res) != len(acc) {
			res = make([]float32, len(acc))
			s.residual[key] = res
		}
		addRow(acc, res)
	}
	var sel []int32
	for r := range h.segRows {
		if nonzero(acc[r*w : r*w+w]) {
			sel = append(sel, int32(r))
		}
	}
	if s.cfg.Rho > 0 {
		sel = topRowsByNorm(acc, w, sel, max(1, int(math.Floor(s.cfg.Rho*float64(h.segRows)))))
		copy(res, acc)
		for _, r := range sel {
			clear(res[int(r)*w : int(r)*w+w])
		}
	}
	idx := make([]uint32, len(sel))
	val := make([]float32, len(sel)*w)
	for k, r := range sel {
		idx[k] = uint32(h.lo + int(r))
		copyRow(val[k*w:k*w+w], acc[int(r)*w:int(r)*w+w])
	}
	return idx, val
}

// topRowsByNorm keeps the k rows of sel with the largest L2 norm in acc
// (ties to the lower row), ascending.
func topRowsByNorm(acc []float32, w int, sel []int32, k int) []int32 {
	if len(sel) <= k {
		return sel
	}
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
	return sel
}

// interAllGather is step 3: an all-gather of the selected rows among the m
// ranks of stream j, summed in node order. It returns the dense aggregate
// of the segment and its non-zero touched rows.
func (h *hiTopK) interAllGather(idx []uint32, val []float32) (agg []float32, oi []uint32, ov []float32, err error) {
	s, w, L, j := h.s, h.w, h.L, h.j
	mine := tensor.AppendFloat32s(tensor.AppendUint32s(make([]byte, 0, len(idx)*(4+4*w)), idx), val)
	var got []message
	if h.m > 1 {
		got, err = s.exchange(s.phase("inter-ag"), opInterAG, h.stream, func(int) message { return message{fmt: fmtCOO, n: uint64(len(idx)), body: mine} }, h.stream,
			func(p int, f uint32, k uint64) (int, error) {
				if f != fmtCOO || k > uint64(h.segRows) {
					return 0, fmt.Errorf("all-gather: format %d with %d rows for a segment of %d", f, k, h.segRows)
				}
				return int(k) * (4 + 4*w), nil
			})
		if err != nil {
			return nil, nil, nil, err
		}
	}
	agg = tensor.Alloc(h.segRows * w)
	touched := make([]bool, h.segRows)
	for p := range h.m {
		if p == h.node {
			err = h.addRows(agg, touched, s.r, idx, val)
		} else {
			msg := got[p*L+j]
			k := int(msg.n)
			err = h.addRows(agg, touched, p*L+j, tensor.Uint32sOrCopy(msg.body[:4*k]), tensor.Float32sOrCopy(msg.body[4*k:]))
		}
		if err != nil {
			s.m.Abort(err)
			return nil, nil, nil, err
		}
	}
	for o, tb := range touched {
		if tb && nonzero(agg[o*w:o*w+w]) {
			oi = append(oi, uint32(h.lo+o))
			ov = append(ov, agg[o*w:o*w+w]...)
		}
	}
	return agg, oi, ov, nil
}

// addRows adds rank p's selected rows into the segment's aggregate,
// checking they lie in the segment and ascend.
func (h *hiTopK) addRows(agg []float32, touched []bool, p int, idx []uint32, val []float32) error {
	w := h.w
	for k, i := range idx {
		if int(i) < h.lo || int(i) >= h.hi || (k > 0 && i <= idx[k-1]) {
			return &BadPeerError{Rank: p, Phase: "inter-ag", Err: fmt.Errorf("row %d (entry %d) outside segment [%d, %d) or not ascending", i, k, h.lo, h.hi)}
		}
		o := int(i) - h.lo
		touched[o] = true
		addRow(agg[o*w:o*w+w], val[k*w:k*w+w])
	}
	return nil
}

// intraAllGather is step 4: an intra-node all-gather of the aggregated
// segments, each sent sparse when COO is smaller than dense; it returns
// every segment's rows, in local-rank order.
func (h *hiTopK) intraAllGather(agg []float32, oi []uint32, ov []float32) ([]list, error) {
	s, w := h.s, h.w
	runs := make([]list, h.L)
	runs[h.j] = list{idx: oi, val: ov}
	if h.L == 1 {
		return runs, nil
	}
	var msg message
	if len(oi)*(4+4*w) < 4*h.segRows*w {
		msg = message{fmt: fmtCOO, n: uint64(len(oi)), body: tensor.AppendFloat32s(tensor.AppendUint32s(nil, oi), ov)}
	} else {
		msg = message{fmt: fmtDense, n: uint64(h.segRows * w), body: tensor.AppendFloat32s(nil, agg)}
	}
	got, err := s.exchange(s.phase("intra-ag"), opIntraAG, h.intra, func(int) message { return msg }, h.intra,
		func(p int, f uint32, k uint64) (int, error) {
			a, b := h.seg(p % h.L)
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
	for q := range h.L {
		if q == h.j {
			continue
		}
		if runs[q], err = h.segmentRun(q, got[h.node*h.L+q]); err != nil {
			s.m.Abort(err)
			return nil, err
		}
	}
	return runs, nil
}

// segmentRun decodes local rank q's aggregated segment (dense or COO) into
// its rows, checking a COO run lies in the segment and ascends.
func (h *hiTopK) segmentRun(q int, msg message) (list, error) {
	a, b := h.seg(q)
	if msg.fmt == fmtDense {
		tt := FromDense(h.t.Name, tensor.Float32sOrCopy(msg.body), b-a, h.w)
		for k := range tt.Idx {
			tt.Idx[k] += uint32(a)
		}
		return list{idx: tt.Idx, val: tt.Val}, nil
	}
	k := int(msg.n)
	l := list{idx: tensor.Uint32sOrCopy(msg.body[:4*k]), val: tensor.Float32sOrCopy(msg.body[4*k:])}
	for e, i := range l.idx {
		if int(i) < a || int(i) >= b || (e > 0 && i <= l.idx[e-1]) {
			return list{}, &BadPeerError{Rank: h.node*h.L + q, Phase: "intra-ag", Err: fmt.Errorf("row %d outside segment [%d, %d) or not ascending", i, a, b)}
		}
	}
	return l, nil
}
