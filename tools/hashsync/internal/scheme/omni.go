package scheme

import (
	"fmt"
	"time"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/tensor"
)

// OmniReduce: the flattened tensor is cut into blocks of Block elements
// (the last one zero-padded); server j aggregates the blocks of the j-th
// even range of blocks; only blocks holding a present row travel, each as
// a u32 block id and Block values.

func (s *Syncer) blocks(t *Tensor) (nb int) {
	e := t.Rows * t.Width
	return (e + s.cfg.Block - 1) / s.cfg.Block
}

func (s *Syncer) prepareOmni(p *Prepared) error {
	t := p.T
	B, w, n := s.cfg.Block, t.Width, s.n
	nb := s.blocks(t)
	// The ids of the blocks that hold a present row, ascending.
	var ids []uint32
	for _, i := range t.Idx {
		lo, hi := int(i)*w/B, (int(i)*w+w-1)/B
		for b := lo; b <= hi; b++ {
			if len(ids) == 0 || ids[len(ids)-1] < uint32(b) {
				ids = append(ids, uint32(b))
			}
		}
	}
	vals := make([]float32, len(ids)*B)
	k := 0
	for r, i := range t.Idx {
		for c := range w {
			e := int(i)*w + c
			b := uint32(e / B)
			for ids[k] < b {
				k++
			}
			vals[k*B+e%B] = t.Val[r*w+c]
		}
	}
	p.push = make([]message, n)
	counts := make([]int, n)
	a := 0
	for j := range n {
		_, hi := collective.Chunk(nb, n, j)
		e := a
		for e < len(ids) && int(ids[e]) < hi {
			e++
		}
		counts[j] = e - a
		body := make([]byte, 0, (e-a)*(4+4*B))
		body = tensor.AppendUint32s(body, ids[a:e])
		body = tensor.AppendFloat32s(body, vals[a*B:e*B])
		p.push[j] = message{fmt: fmtBlocks, n: uint64(e - a), body: body}
		a = e
	}
	p.local = p.push[s.r]
	if len(ids) > 0 {
		p.stats.PushImbalance = imbalance(counts)
	}
	return nil
}

func (s *Syncer) syncOmni(p *Prepared) (*Tensor, error) {
	t, st := p.T, &p.stats
	B, w, n, me := s.cfg.Block, t.Width, s.n, s.r
	nb := s.blocks(t)
	all := others(n, me)
	t0 := time.Now()
	bodyLen := func(phase string) bodyLenFunc {
		return func(q int, f uint32, k uint64) (int, error) {
			j := me
			if phase == "pull" {
				j = q
			}
			lo, hi := collective.Chunk(nb, n, j)
			if f != fmtBlocks || k > uint64(hi-lo) {
				return 0, fmt.Errorf("%s: format %d with %d blocks for a range of %d", phase, f, k, hi-lo)
			}
			return int(k) * (4 + 4*B), nil
		}
	}
	got, err := s.exchange(s.phase("push"), opPush, all, func(q int) message { return p.push[q] }, all, bodyLen("push"))
	if err != nil {
		return nil, err
	}
	got[me] = p.local
	t1 := time.Now()
	st.Times["push"] = t1.Sub(t0).Seconds()
	lo, hi := collective.Chunk(nb, n, me)
	acc := tensor.Alloc((hi - lo) * B)
	touched := make([]bool, hi-lo)
	check := func(q int, m message, lo, hi int) ([]uint32, []float32, error) {
		k := int(m.n)
		ids := tensor.Uint32sOrCopy(m.body[:4*k])
		for i, b := range ids {
			if int(b) < lo || int(b) >= hi || (i > 0 && b <= ids[i-1]) {
				return nil, nil, &BadPeerError{Rank: q, Phase: "omnireduce", Err: fmt.Errorf("block %d (entry %d) outside [%d, %d) or not ascending", b, i, lo, hi)}
			}
		}
		return ids, tensor.Float32sOrCopy(m.body[4*k:]), nil
	}
	for q := range n {
		ids, vals, err := check(q, got[q], lo, hi)
		if err != nil {
			s.m.Abort(err)
			return nil, err
		}
		for k, b := range ids {
			o := int(b) - lo
			touched[o] = true
			addRow(acc[o*B:o*B+B], vals[k*B:k*B+B])
		}
	}
	var myIDs []uint32
	var myVals []float32
	for o, tb := range touched {
		if tb && nonzero(acc[o*B:o*B+B]) {
			myIDs = append(myIDs, uint32(lo+o))
			myVals = append(myVals, acc[o*B:o*B+B]...)
		}
	}
	body := tensor.AppendUint32s(make([]byte, 0, len(myIDs)*(4+4*B)), myIDs)
	body = tensor.AppendFloat32s(body, myVals)
	pull := message{fmt: fmtBlocks, n: uint64(len(myIDs)), body: body}
	t2 := time.Now()
	st.Times["aggregate"] = t2.Sub(t1).Seconds()
	res, err := s.exchange(s.phase("pull"), opPull, all, func(int) message { return pull }, all, bodyLen("pull"))
	if err != nil {
		return nil, err
	}
	res[me] = pull
	t3 := time.Now()
	st.Times["pull"] = t3.Sub(t2).Seconds()
	out := &Tensor{Name: t.Name, Rows: t.Rows, Width: w}
	E := t.Rows * w
	pullCounts := make([]int, n)
	for q := range n {
		qlo, qhi := collective.Chunk(nb, n, q)
		ids, vals, err := check(q, res[q], qlo, qhi)
		if err != nil {
			s.m.Abort(err)
			return nil, err
		}
		pullCounts[q] = len(ids)
		for k, b := range ids {
			for c, v := range vals[k*B : k*B+B] {
				e := int(b)*B + c
				if v == 0 || e >= E {
					continue
				}
				r := uint32(e / w)
				if len(out.Idx) == 0 || out.Idx[len(out.Idx)-1] != r {
					out.Idx = append(out.Idx, r)
					out.Val = append(out.Val, make([]float32, w)...)
				}
				out.Val[(len(out.Idx)-1)*w+e%w] = v
			}
		}
	}
	st.Times["decode"] = time.Since(t3).Seconds()
	st.PullImbalance = imbalance(pullCounts)
	return out, nil
}
