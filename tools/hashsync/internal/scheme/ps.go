package scheme

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/tensor"
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
	// h0 computed (a few multiplies) rather than 𝕀_j looked up: one
	// random memory access per row instead of two.
	return int(h.t.Rank[idx]), h.t.Part(idx) == j
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
		idx, flushIdx := tensor.WritableUint32s(body[:4*c])
		val, flushVal := tensor.WritableFloat32s(body[4*c:])
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
//
// The pull is a pipeline. Once every push is in, the server knows which
// of its rows it will return (the union of the rows pushed to it, 𝕌) and
// sends that set at once, as the head of its pull message (hash bitmap or
// row indices). It then sums its partition chunk by chunk (position
// ranges of its set, in rank order within each row) straight into the
// pull body, and sends each chunk as soon as it is summed. A receiver
// that has every server's head knows where each row goes in the
// ascending result (merger), so it copies each chunk into place as it
// lands: summing, sending, receiving and placing overlap, and the result
// is complete when the last chunk is in. Rows whose sum is zero travel
// (the set is fixed before the sums are known) and are dropped from a
// sparse result by Sync's Compact.
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
	S := lay.size(me)
	var prof *profile
	if p.scheme == "profile" {
		prof = newProfile(n)
	}
	// Each push's rows become positions in this server's set as they
	// arrive, checked to belong here (and to be distinct: a bitmap per
	// message).
	posOf := make([][]int32, n)
	vals := make([][]float32, n)
	if len(s.dupBits) != n {
		s.dupBits = make([][]uint64, n)
	}
	toPos := func(q int, m message) error {
		k := int(m.n)
		idx := tensor.Uint32sOrCopy(m.body[:4*k])
		if cap(s.posBuf[q]) < k {
			s.posBuf[q] = make([]int32, k+k/8)
		}
		pos := s.posBuf[q][:k]
		nw := (S + 63) / 64
		if cap(s.dupBits[q]) < nw {
			s.dupBits[q] = make([]uint64, nw)
		}
		dup := s.dupBits[q][:nw]
		clear(dup)
		for i, x := range idx {
			t, ok := lay.pos(me, x)
			if !ok {
				return fmt.Errorf("row %d does not belong to partition %d", x, me)
			}
			if dup[t>>6]&(1<<(t&63)) != 0 {
				return fmt.Errorf("row %d (entry %d) is sent twice", x, i)
			}
			dup[t>>6] |= 1 << (t & 63)
			pos[i] = int32(t)
		}
		posOf[q], vals[q] = pos, tensor.Float32sOrCopy(m.body[4*k:])
		return nil
	}
	if err := toPos(me, p.local); err != nil {
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
		return nil, err
	}
	t1 := time.Now()
	st.Times["push"] = t1.Sub(t0).Seconds()

	// 𝕌 over this server's positions, and each position's rank in it.
	nw := (S + 63) / 64
	if cap(s.union) < nw {
		s.union, s.unionPre = make([]uint64, nw), make([]int32, nw)
	}
	U, pre := s.union[:nw], s.unionPre[:nw]
	clear(U)
	for q := range n {
		if prof != nil {
			prof.rowsFrom[q] = len(posOf[q])
		}
		for k, x := range s.dupBits[q][:nw] {
			U[k] |= x
		}
	}
	nnz := 0
	for k, x := range U {
		pre[k] = int32(nnz)
		nnz += bits.OnesCount64(x)
	}
	rankU := func(pos int) int {
		return int(pre[pos>>6]) + bits.OnesCount64(U[pos>>6]&(1<<(pos&63)-1))
	}
	K := pullChunks(nnz, w)
	// Chunk c covers positions [c·S/K, (c+1)·S/K): its rows are 𝕌's
	// ranks cb[c] ≤ u < cb[c+1].
	cb := make([]int, K+1)
	for c := range K {
		lo := chunkLo(S, K, c)
		if lo < S {
			cb[c] = rankU(lo)
		} else {
			cb[c] = nnz
		}
	}
	cb[K] = nnz
	useBitmap := false
	if p.scheme == "zen" || p.scheme == "profile" {
		switch s.cfg.Pull {
		case "bitmap":
			useBitmap = true
		case "auto":
			useBitmap = zen.BitmapBytes(S) < 4*nnz
		}
	}
	headLen := 4 * nnz
	if useBitmap {
		headLen = zen.BitmapBytes(S)
	}
	bodyLen := nnz * 4 * w
	if cap(s.pullBody) < bodyLen+headLen {
		s.pullBody = make([]byte, bodyLen+headLen+(bodyLen+headLen)/8)
	}
	body, head := s.pullBody[:bodyLen], s.pullBody[bodyLen:bodyLen+headLen]
	if cap(s.mineIdx) < nnz {
		s.mineIdx = make([]uint32, nnz+nnz/8)
	}
	mine := s.mineIdx[:nnz]
	{
		u := 0
		for k, x := range U {
			for x != 0 {
				mine[u] = lay.at(me, k<<6+bits.TrailingZeros64(x))
				u++
				x &= x - 1
			}
		}
	}
	pull := message{n: uint64(nnz), head: head, body: body, chunks: make([]int, K)}
	if useBitmap {
		var b [8]byte
		for k, x := range U {
			binary.LittleEndian.PutUint64(b[:], x)
			copy(head[8*k:], b[:])
		}
		pull.fmt = fmtBitmap
	} else {
		idx, flush := tensor.WritableUint32s(head)
		copy(idx, mine)
		flush()
		pull.fmt = fmtCOO
	}
	ready := make([]chan struct{}, K)
	for c := range K {
		pull.chunks[c] = (cb[c+1] - cb[c]) * 4 * w
		ready[c] = make(chan struct{})
	}
	pull.ready = func(c int) { <-ready[c] }

	// The receiving side: rows and chunk bounds of every server's run.
	runIdx := make([][]uint32, n)
	runCB := make([][]int, n)
	pullCounts := make([]int, n)
	runIdx[me], runCB[me], pullCounts[me] = mine, cb, nnz
	dense := p.DenseOut
	var (
		mu     sync.Mutex
		mg     *merger
		mgErr  error
		in     = make([]int, n) // chunks of each run in
		placed = make([]int, n) // chunks of each run placed
		heads  atomic.Int32
		chunk  = make([][][]float32, n)
	)
	chunk[me] = make([][]float32, K)
	placeChunk := func(g *merger, q, c int) {
		lo, hi := runCB[q][c], runCB[q][c+1]
		g.place(list{runIdx[q][lo:hi], chunk[q][c]})
	}
	// landed records chunk c of run q and places it when the layout is
	// known (every chunk of a run lands in order).
	landed := func(q, c int, v []float32) {
		chunk[q][c] = v
		if dense != nil {
			lo, hi := runCB[q][c], runCB[q][c+1]
			scatterRows(dense, w, list{runIdx[q][lo:hi], v})
			return
		}
		mu.Lock()
		in[q] = c + 1
		g := mg
		do := g != nil && placed[q] == c
		if do {
			placed[q] = c + 1
		}
		mu.Unlock()
		if do {
			placeChunk(g, q, c)
		}
	}
	// layout builds the merger once every head is in and places the
	// chunks already landed.
	layout := func() {
		runs := make([]list, n)
		for q := range n {
			runs[q].idx = runIdx[q]
		}
		g, err := newMerger(t.Name, t.Rows, w, runs)
		type todo struct{ q, lo, hi int }
		var jobs []todo
		mu.Lock()
		mg, mgErr = g, err
		if err == nil {
			for q := range n {
				if placed[q] < in[q] {
					jobs = append(jobs, todo{q, placed[q], in[q]})
					placed[q] = in[q]
				}
			}
		}
		mu.Unlock()
		for _, j := range jobs {
			for c := j.lo; c < j.hi; c++ {
				placeChunk(g, j.q, c)
			}
		}
	}
	onHead := func(q int, m message) error {
		k := int(m.n)
		pullCounts[q] = k
		size := lay.size(q)
		Kq := pullChunks(k, w)
		if cap(s.runIdx[q]) < k {
			s.runIdx[q] = make([]uint32, k+k/8)
		}
		l := s.runIdx[q][:0]
		b := make([]int, Kq+1)
		c := 0
		// next advances the chunk bounds to position t, which is the
		// position of run entry len(l).
		next := func(t int) {
			for c < Kq {
				_, hi := collective.Chunk(size, Kq, c)
				if t < hi {
					break
				}
				c++
				b[c] = len(l)
			}
		}
		if m.fmt == fmtBitmap {
			// Bit t of the bitmap names 𝕀_q[t].
			bm := m.head
			if r := size % 8; r != 0 && len(bm) > 0 && bm[len(bm)-1]>>r != 0 {
				return fmt.Errorf("hash bitmap sets bits past row %d of the partition", size)
			}
			for i, x := range bm {
				for x != 0 {
					if len(l) == k {
						return fmt.Errorf("hash bitmap has more than %d bits set", k)
					}
					t := i*8 + bits.TrailingZeros8(x)
					next(t)
					l = append(l, lay.at(q, t))
					x &= x - 1
				}
			}
			if len(l) != k {
				return fmt.Errorf("hash bitmap has %d bits set for %d rows", len(l), k)
			}
		} else {
			prev := -1
			for i, x := range tensor.Uint32sOrCopy(m.head) {
				t, ok := lay.pos(q, x)
				if !ok || t <= prev {
					return fmt.Errorf("row %d (entry %d) is not in partition %d or not ascending", x, i, q)
				}
				prev = t
				next(t)
				l = append(l, x)
			}
		}
		for c < Kq {
			c++
			b[c] = len(l)
		}
		runIdx[q], runCB[q] = l, b
		chunk[q] = make([][]float32, Kq)
		if dense == nil && heads.Add(1) == int32(len(all)) {
			layout()
		}
		return nil
	}
	recvChunks := func(q int, m message) []int {
		b := runCB[q]
		l := make([]int, len(b)-1)
		for c := range l {
			l[c] = (b[c+1] - b[c]) * 4 * w
		}
		return l
	}
	onChunk := func(q, c int, v []byte) error {
		landed(q, c, tensor.Float32sOrCopy(v))
		return nil
	}
	if dense == nil && len(all) == 0 {
		layout() // no heads to wait for
	}
	// The exchange runs while this goroutine sums the chunks: each
	// sender waits for a chunk to be summed before sending it.
	done := make(chan error, 1)
	go func() {
		_, err := s.exchangeSplit(s.phase("pull"), opPull, all, func(int) message { return pull }, all,
			func(q int, f uint32, nnz uint64) (int, int, error) {
				size := lay.size(q)
				if nnz > uint64(size) {
					return 0, 0, fmt.Errorf("pull: %d rows for a partition of %d rows", nnz, size)
				}
				switch f {
				case fmtCOO:
					return int(nnz) * 4, int(nnz) * 4 * w, nil
				case fmtBitmap:
					if !hashed && p.scheme != "profile" {
						break
					}
					return zen.BitmapBytes(size), int(nnz) * 4 * w, nil
				}
				return 0, 0, fmt.Errorf("pull: format %d", f)
			}, onHead, nil, s.recvBufs(opPullHead), s.recvBufs(opPull), recvChunks, onChunk)
		done <- err
	}()
	// Sum chunk by chunk, each row's contributions in rank order from 0
	// (as the reference sum does). Each push's entries are first bucketed
	// by chunk (a counting pass: pushes need not be in position order).
	var seen []uint64
	if prof != nil {
		seen = make([]uint64, (nnz+63)/64)
	}
	chunkOf := func(pos int) int {
		c := pos * K / S
		for c > 0 && pos < chunkLo(S, K, c) {
			c--
		}
		for c+1 < K && pos >= chunkLo(S, K, c+1) {
			c++
		}
		return c
	}
	// order[q] lists q's entries chunk by chunk; from[q][c] is where
	// chunk c starts in it.
	order := make([][]int32, n)
	from := make([][]int32, n)
	for q := range n {
		if cap(s.order[q]) < len(posOf[q]) {
			s.order[q] = make([]int32, len(posOf[q])+len(posOf[q])/8)
		}
		o, f := s.order[q][:len(posOf[q])], make([]int32, K+1)
		for _, pos := range posOf[q] {
			f[chunkOf(int(pos))+1]++
		}
		for c := range K {
			f[c+1] += f[c]
		}
		at := slices.Clone(f[:K])
		for k, pos := range posOf[q] {
			c := chunkOf(int(pos))
			o[at[c]] = int32(k)
			at[c]++
		}
		order[q], from[q] = o, f
	}
	for c := range K {
		v, flush := tensor.WritableFloat32s(body[cb[c]*4*w : cb[c+1]*4*w])
		clear(v)
		base := cb[c]
		for q := range n {
			ps, src := posOf[q], vals[q]
			for _, k := range order[q][from[q][c]:from[q][c+1]] {
				u := rankU(int(ps[k]))
				if seen != nil && seen[u>>6]&(1<<(u&63)) == 0 {
					seen[u>>6] |= 1 << (u & 63)
					prof.newRows[q]++
				}
				u -= base
				addRow(v[u*w:u*w+w], src[int(k)*w:int(k)*w+w])
			}
		}
		flush()
		close(ready[c])
		landed(me, c, v)
	}
	t2 := time.Now()
	st.Times["aggregate"] = t2.Sub(t1).Seconds()
	if err := <-done; err != nil {
		return nil, err
	}
	if mgErr != nil {
		return nil, mgErr
	}
	t3 := time.Now()
	st.Times["pull"] = t3.Sub(t1).Seconds()
	var out *Tensor
	if dense != nil {
		// Already in place: list the rows written.
		out = &Tensor{Name: t.Name, Rows: t.Rows, Width: w, DenseVal: dense}
		total := 0
		for _, r := range runIdx {
			total += len(r)
		}
		out.Idx = make([]uint32, 0, total)
		for _, r := range runIdx {
			out.Idx = append(out.Idx, r...)
		}
	} else {
		// Every chunk was placed as it landed.
		out = mg.t
	}
	st.Times["decode"] = time.Since(t3).Seconds()
	st.PullImbalance = imbalance(pullCounts)
	if prof != nil {
		st.profile = prof
		prof.outRows = out.Nnz()
	}
	return out, nil
}

// pullChunks is the number of chunks a pull of nnz rows of w values is
// sent in: pieces of about 128 KiB, at most 8 (sender and receivers
// derive it from the announced count).
func pullChunks(nnz, w int) int {
	return max(1, min(8, nnz*4*w/(128<<10)))
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

// chunkLo is where chunk c of K starts among S positions (the cut of
// collective.Chunk).
func chunkLo(S, K, c int) int {
	lo, _ := collective.Chunk(S, K, c)
	return lo
}
