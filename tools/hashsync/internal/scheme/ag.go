package scheme

import (
	"context"
	"fmt"
	"slices"
	"time"

	"trainwire.dev/lib/tensor"
)

// counts exchanges one number per rank (the sizes the next collective
// needs), under the meta phase.
func (s *Syncer) counts(v uint64, limit uint64) ([]uint64, error) {
	all := others(s.n, s.r)
	got, err := s.exchange(s.meta, opCounts, all, func(int) message { return message{fmt: fmtDense, n: v} }, all,
		func(p int, f uint32, k uint64) (int, error) {
			if f != fmtDense || k > limit {
				return 0, fmt.Errorf("count %d over %d", k, limit)
			}
			return 0, nil
		})
	if err != nil {
		return nil, err
	}
	out := make([]uint64, s.n)
	for p := range s.n {
		out[p] = got[p].n
	}
	out[s.r] = v
	return out, nil
}

// syncAG is AGsparse, as torch users write it: all-gather the COO indices,
// all-gather the values (two ring all-gathers), and sum everything locally
// in rank order.
func (s *Syncer) syncAG(ctx context.Context, t *Tensor, st *Stats) (*Tensor, error) {
	w, n := t.Width, s.n
	t0 := time.Now()
	cnt, err := s.counts(uint64(t.Nnz()), uint64(t.Rows))
	if err != nil {
		return nil, err
	}
	total := 0
	ic, vc := make([]int, n), make([]int, n)
	for p, c := range cnt {
		total += int(c)
		ic[p], vc[p] = 4*int(c), 4*w*int(c)
	}
	if int64(total)*int64(4+4*w) > s.cfg.MaxMessage {
		return nil, fmt.Errorf("agsparse: %d gathered rows over --max-message", total)
	}
	// The gathers write bytes: into aligned homes that the results view
	// (zero-copy builds) or are decoded from (portable builds, where a
	// tensor.Bytes view would be a copy the gather's writes never reach).
	ib := tensor.Uint32Bytes(make([]uint32, total))
	if err := s.comm.AllGatherVBytes(ctx, tensor.Uint32Bytes(t.Idx), ic, ib); err != nil {
		return nil, err
	}
	idx := tensor.Uint32sOrCopy(ib)
	vb := tensor.Bytes(tensor.Alloc(total * w))
	if err := s.comm.AllGatherVBytes(ctx, tensor.Bytes(t.Val), vc, vb); err != nil {
		return nil, err
	}
	val := tensor.Float32sOrCopy(vb)
	t1 := time.Now()
	st.Times["allgather"] = t1.Sub(t0).Seconds()
	// Check every gathered index, then sum in rank order: a stable sort of
	// the entries by row keeps rank order among equal rows.
	for k, i := range idx {
		if int64(i) >= int64(t.Rows) {
			p := 0
			for o := 0; k >= o+int(cnt[p]); p++ {
				o += int(cnt[p])
			}
			err := &BadPeerError{Rank: p, Phase: "allgather", Err: fmt.Errorf("row %d outside [0, %d)", i, t.Rows)}
			s.m.Abort(err)
			return nil, err
		}
	}
	perm := make([]int32, total)
	for i := range perm {
		perm[i] = int32(i)
	}
	slices.SortStableFunc(perm, func(a, b int32) int {
		x, y := idx[a], idx[b]
		if x < y {
			return -1
		}
		if x > y {
			return 1
		}
		return 0
	})
	out := &Tensor{Name: t.Name, Rows: t.Rows, Width: w}
	for _, k := range perm {
		i := idx[k]
		if len(out.Idx) == 0 || out.Idx[len(out.Idx)-1] != i {
			out.Idx = append(out.Idx, i)
			out.Val = append(out.Val, make([]float32, w)...)
		}
		addRow(out.Val[(len(out.Idx)-1)*w:], val[int(k)*w:int(k)*w+w])
	}
	st.Times["aggregate"] = time.Since(t1).Seconds()
	return out, nil
}

// syncDense is the ring allreduce of lib/collective on the densified
// tensor.
func (s *Syncer) syncDense(ctx context.Context, t *Tensor, st *Stats) (*Tensor, error) {
	t0 := time.Now()
	d := tensor.Alloc(t.Rows * t.Width)
	t.ScatterInto(d)
	if err := s.comm.AllReduce(ctx, d); err != nil {
		return nil, err
	}
	t1 := time.Now()
	st.Times["allreduce"] = t1.Sub(t0).Seconds()
	out := FromDense(t.Name, d, t.Rows, t.Width)
	st.Times["decode"] = time.Since(t1).Seconds()
	return out, nil
}
