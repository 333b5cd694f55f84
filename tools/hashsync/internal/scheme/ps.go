package scheme

import (
	"fmt"
	"math/bits"
	"slices"
	"time"

	"trainwire.dev/lib/collective"

	"trainwire.dev/lib/zen"
)

// layout is how a parameter-server scheme splits the rows among n servers:
// server j owns a set of rows (its universe), each with a position.
type layout interface {
	size(j int) int
	// pos returns the position of row idx in server j's universe, and
	// whether j owns idx.
	pos(j int, idx uint32) (int, bool)
	// at returns the row at position t of server j's universe.
	at(j, t int) uint32
}

type hashLayout struct{ t *zen.Table }

func (h hashLayout) size(j int) int { return h.t.Size(j) }
func (h hashLayout) pos(j int, idx uint32) (int, bool) {
	if int64(idx) >= int64(h.t.Rows) {
		return 0, false
	}
	r := int(h.t.Rank[idx])
	return r, r < h.t.Size(j) && h.t.Sets[h.t.Off[j]+r] == idx
}
func (h hashLayout) at(j, t int) uint32 { return h.t.Sets[h.t.Off[j]+t] }

type rangeLayout struct{ rows, n int }

func (r rangeLayout) bounds(j int) (int, int) { return collective.Chunk(r.rows, r.n, j) }
func (r rangeLayout) size(j int) int          { lo, hi := r.bounds(j); return hi - lo }
func (r rangeLayout) pos(j int, idx uint32) (int, bool) {
	lo, hi := r.bounds(j)
	return int(idx) - lo, int64(idx) >= int64(lo) && int64(idx) < int64(hi)
}
func (r rangeLayout) at(j, t int) uint32 { lo, _ := r.bounds(j); return uint32(lo + t) }

func (s *Syncer) layoutFor(t *Tensor, hashed bool) (layout, error) {
	if !hashed {
		return rangeLayout{t.Rows, s.n}, nil
	}
	tb, err := zen.TableFor(t.Rows, s.n, s.seeds[0])
	if err != nil {
		return nil, err
	}
	return hashLayout{tb}, nil
}

// preparePS partitions the local rows (by h0 through Algorithm 1 or the
// counting sort when hashed, by even ranges otherwise) and encodes the n
// push messages in COO: u32 row indices, then the rows' values.
func (s *Syncer) preparePS(p *Prepared, hashed bool) error {
	t := p.T
	w, n := t.Width, s.n
	counts := make([]int, n)
	p.push = make([]message, n)
	// encode writes part j in one buffer: its row indices, then their
	// values (rows gathered straight into the message, one copy).
	encode := func(j int, part []int32, lo, hi int) {
		c := counts[j]
		body := make([]byte, c*(4+4*w))
		idx, flushIdx := u32out(body[:4*c])
		val, flushVal := f32out(body[4*c:])
		if part != nil {
			for i, k := range part {
				idx[i] = t.Idx[k]
				copy(val[i*w:i*w+w], t.Val[int(k)*w:int(k)*w+w])
			}
		} else {
			copy(idx, t.Idx[lo:hi])
			copy(val, t.Val[lo*w:hi*w])
		}
		flushIdx()
		flushVal()
		p.push[j] = message{fmt: fmtCOO, n: uint64(c), body: body}
	}
	if hashed {
		var parts *zen.Parts
		if s.cfg.Partitioner == "bucket" {
			parts = s.bucketer.Bucket(t.Idx, n, s.seeds[0], s.cfg.Workers)
		} else {
			var err error
			parts, err = s.hasher.Hash(t.Idx, zen.HashConfig{N: n, Seeds: s.seeds, C: s.cfg.C, R2: s.cfg.R2, Workers: s.cfg.Workers})
			if err != nil {
				return err
			}
		}
		p.stats.Serial, p.stats.Overflow = parts.Serial, parts.Overflow
		for j := range n {
			part := parts.Part(j)
			counts[j] = len(part)
			encode(j, part, 0, 0)
		}
	} else {
		for j := range n {
			lo, hi := collective.Chunk(t.Rows, n, j)
			a, _ := slices.BinarySearch(t.Idx, uint32(lo))
			b := len(t.Idx)
			if hi < t.Rows {
				b, _ = slices.BinarySearch(t.Idx, uint32(hi))
			}
			counts[j] = b - a
			encode(j, nil, a, b)
		}
	}
	p.local = p.push[s.r]
	if t.Nnz() > 0 {
		p.stats.PushImbalance = imbalance(counts)
	}
	return nil
}

// syncPS is the parameter-server data path of zen, bp-coo and sparse-ps:
// push COO partitions to their servers, aggregate in rank order, pull.
func (s *Syncer) syncPS(p *Prepared) (*Tensor, error) {
	t, st := p.T, &p.stats
	w, n, me := t.Width, s.n, s.r
	hashed := p.scheme != "sparse-ps"
	lay, err := s.layoutFor(t, hashed)
	if err != nil {
		return nil, err
	}
	all := others(n, me)
	t0 := time.Now()
	// Aggregate partition me: contributions added in rank order 0..n−1,
	// each from 0, as the reference sum does. The adding overlaps the
	// push: worker q's rows are added as soon as they and those of every
	// lower rank are in. A compact accumulator: slot[pos] is 1 + the row's
	// place in acc, assigned on first touch, so memory and clearing scale
	// with the rows received, not with |𝕀_j|.
	S := lay.size(me)
	if cap(s.slot) < S {
		s.slot = make([]int32, S)
	}
	slot := s.slot[:S]
	acc := s.acc[:0]
	touched := zen.NewBitmap(S)
	var prof *profile
	if p.scheme == "profile" {
		prof = newProfile(n)
	}
	posOf := make([][]int32, n)
	vals := make([][]float32, n)
	ready := make([]chan struct{}, n)
	for q := range ready {
		ready[q] = make(chan struct{})
	}
	quit := make(chan struct{})
	aggDone := make(chan bool, 1)
	go func() {
		for q := range n {
			select {
			case <-ready[q]:
			case <-quit:
				aggDone <- false
				return
			}
			if prof != nil {
				prof.rowsFrom[q] = len(posOf[q])
			}
			val := vals[q]
			for k, p32 := range posOf[q] {
				pos := int(p32)
				sl := slot[pos]
				if !touched.Has(pos) {
					if prof != nil {
						prof.newRows[q]++
					}
					touched.Set(pos)
					acc = append(acc, make([]float32, w)...)
					sl = int32(len(acc) / w)
					slot[pos] = sl
				}
				a := int(sl-1) * w
				addRow(acc[a:a+w], val[k*w:k*w+w])
			}
		}
		aggDone <- true
	}()
	// Each message's rows become positions in this server's set as soon
	// as it arrives (checking that they belong here).
	toPos := func(q int, m message) error {
		k := int(m.n)
		idx := u32view(m.body[:4*k])
		if cap(s.posBuf[q]) < k {
			s.posBuf[q] = make([]int32, k+k/8)
		}
		pos := s.posBuf[q][:k]
		for i, x := range idx {
			t, ok := lay.pos(me, x)
			if !ok {
				return fmt.Errorf("row %d does not belong to partition %d", x, me)
			}
			pos[i] = int32(t)
		}
		posOf[q], vals[q] = pos, f32view(m.body[4*k:])
		close(ready[q])
		return nil
	}
	if err := toPos(me, p.local); err != nil {
		close(quit)
		<-aggDone
		return nil, err
	}
	_, err = s.exchangeThen(s.phase("push"), opPush, all, func(q int) message { return p.push[q] }, all,
		func(q int, f uint32, nnz uint64) (int, error) {
			if f != fmtCOO || nnz > uint64(lay.size(me)) {
				return 0, fmt.Errorf("push: format %d with %d rows for a partition of %d rows", f, nnz, lay.size(me))
			}
			return int(nnz) * (4 + 4*w), nil
		}, toPos, s.recvBufs(opPush))
	if err != nil {
		close(quit)
		<-aggDone
		return nil, err
	}
	t1 := time.Now()
	st.Times["push"] = t1.Sub(t0).Seconds()
	<-aggDone
	// The aggregated rows: present and not all zero, ascending.
	rows := s.rows[:0]
	for wi, word := range touched {
		for word != 0 {
			pos := wi<<6 + bits.TrailingZeros64(word)
			word &= word - 1
			a := int(slot[pos]-1) * w
			if nonzero(acc[a : a+w]) {
				rows = append(rows, int32(pos))
			}
		}
	}
	s.rows, s.acc = rows, acc
	nnz := len(rows)
	cooLen := nnz * (4 + 4*w)
	bmLen := zen.BitmapBytes(S) + nnz*4*w
	useBitmap := false
	if p.scheme == "zen" || p.scheme == "profile" {
		switch s.cfg.Pull {
		case "bitmap":
			useBitmap = true
		case "auto":
			useBitmap = bmLen < cooLen
		}
	}
	// The pull message, written in place: the sums go from the accumulator
	// straight into it (its buffer is reused from step to step: the sends
	// are over when the exchange returns, and the result is copied out of
	// it before syncPS returns). This rank's own run views the message.
	bodyLen := cooLen
	if useBitmap {
		bodyLen = bmLen
	}
	if cap(s.pullBody) < bodyLen {
		s.pullBody = make([]byte, bodyLen+bodyLen/8)
	}
	body := s.pullBody[:bodyLen]
	if cap(s.mineIdx) < nnz {
		s.mineIdx = make([]uint32, nnz+nnz/8)
	}
	mine := list{idx: s.mineIdx[:nnz]}
	var pull message
	if useBitmap {
		// Values first (so they stay 4-byte aligned for the receiver's
		// zero-copy view), then the hash bitmap over 𝕀_me.
		val, flush := f32out(body[:nnz*4*w])
		bm := body[nnz*4*w:]
		clear(bm)
		for k, pos := range rows {
			a := int(slot[pos]-1) * w
			copy(val[k*w:k*w+w], acc[a:a+w])
			bm[pos>>3] |= 1 << (pos & 7)
			mine.idx[k] = lay.at(me, int(pos))
		}
		flush()
		mine.val = val
		pull = message{fmt: fmtBitmap, n: uint64(nnz), body: body}
	} else {
		idx, flushIdx := u32out(body[:4*nnz])
		val, flushVal := f32out(body[4*nnz:])
		for k, pos := range rows {
			a := int(slot[pos]-1) * w
			copy(val[k*w:k*w+w], acc[a:a+w])
			idx[k] = lay.at(me, int(pos))
		}
		copy(mine.idx, idx)
		flushIdx()
		flushVal()
		mine.val = val
		pull = message{fmt: fmtCOO, n: uint64(nnz), body: body}
	}
	t2 := time.Now()
	st.Times["aggregate"] = t2.Sub(t1).Seconds()

	runs := make([]list, n)
	pullCounts := make([]int, n)
	runs[me] = mine
	pullCounts[me] = nnz
	// A dense result: every server's rows go straight into place as they
	// arrive (partitions are disjoint, so the writers never meet), this
	// rank's own while the pull is on the wire.
	dense := p.DenseOut
	ownDone := make(chan struct{})
	if dense != nil {
		go func() {
			scatterRows(dense, w, mine)
			close(ownDone)
		}()
	} else {
		close(ownDone)
	}
	decode := func(q int, m message) error {
		k := int(m.n)
		pullCounts[q] = k
		var l list
		if m.fmt == fmtBitmap {
			// Decode straight to row indices: bit t of the bitmap names
			// 𝕀_q[t].
			size := lay.size(q)
			vb := k * 4 * w
			bm := m.body[vb:]
			if len(bm) != zen.BitmapBytes(size) {
				return fmt.Errorf("hash bitmap of %d bytes for %d rows", len(bm), size)
			}
			if r := size % 8; r != 0 && len(bm) > 0 && bm[len(bm)-1]>>r != 0 {
				return fmt.Errorf("hash bitmap sets bits past row %d of the partition", size)
			}
			hl, hashedLayout := lay.(hashLayout)
			if cap(s.runIdx[q]) < k {
				s.runIdx[q] = make([]uint32, k+k/8)
			}
			l.idx = s.runIdx[q][:0]
			for i, c := range bm {
				for c != 0 {
					if len(l.idx) == k {
						return fmt.Errorf("hash bitmap has more than %d bits set", k)
					}
					t := i*8 + bits.TrailingZeros8(c)
					if hashedLayout {
						l.idx = append(l.idx, hl.t.Sets[hl.t.Off[q]+t])
					} else {
						l.idx = append(l.idx, lay.at(q, t))
					}
					c &= c - 1
				}
			}
			if len(l.idx) != k {
				return fmt.Errorf("hash bitmap has %d bits set for %d rows", len(l.idx), k)
			}
			l.val = f32view(m.body[:vb])
		} else {
			l.idx = u32view(m.body[:4*k])
			l.val = f32view(m.body[4*k:])
			for i, x := range l.idx {
				if _, ok := lay.pos(q, x); !ok || (i > 0 && x <= l.idx[i-1]) {
					return fmt.Errorf("row %d (entry %d) is not in partition %d or not ascending", x, i, q)
				}
			}
		}
		runs[q] = l
		if dense != nil {
			scatterRows(dense, w, l)
		}
		return nil
	}
	_, err = s.exchangeThen(s.phase("pull"), opPull, all, func(int) message { return pull }, all,
		func(q int, f uint32, nnz uint64) (int, error) {
			size := lay.size(q)
			if nnz > uint64(size) {
				return 0, fmt.Errorf("pull: %d rows for a partition of %d rows", nnz, size)
			}
			switch f {
			case fmtCOO:
				return int(nnz) * (4 + 4*w), nil
			case fmtBitmap:
				if !hashed && p.scheme != "profile" {
					break
				}
				return zen.BitmapBytes(size) + int(nnz)*4*w, nil
			}
			return 0, fmt.Errorf("pull: format %d", f)
		}, decode, s.recvBufs(opPull))
	<-ownDone
	if err != nil {
		return nil, err
	}
	t3 := time.Now()
	st.Times["pull"] = t3.Sub(t2).Seconds()
	var out *Tensor
	if dense != nil {
		// Already in place: list the rows written.
		out = &Tensor{Name: t.Name, Rows: t.Rows, Width: w, DenseVal: dense}
		total := 0
		for _, r := range runs {
			total += len(r.idx)
		}
		out.Idx = make([]uint32, 0, total)
		for _, r := range runs {
			out.Idx = append(out.Idx, r.idx...)
		}
	} else {
		out = mergeLists(t.Name, t.Rows, w, runs)
	}
	st.Times["decode"] = time.Since(t3).Seconds()
	st.PullImbalance = imbalance(pullCounts)
	if prof != nil {
		st.profile = prof
		prof.outRows = out.Nnz()
	}
	return out, nil
}

// scatterRows writes the rows of l into their places in dense.
func scatterRows(dense []float32, w int, l list) {
	for k, i := range l.idx {
		copy(dense[int(i)*w:int(i)*w+w], l.val[k*w:k*w+w])
	}
}

// recvBufs returns the receive buffers of op's messages, one per rank,
// kept from step to step.
func (s *Syncer) recvBufs(op int) [][]byte {
	b := s.rbufs[op]
	if len(b) != s.n {
		b = make([][]byte, s.n)
		if s.rbufs == nil {
			s.rbufs = map[int][][]byte{}
		}
		s.rbufs[op] = b
	}
	return b
}
