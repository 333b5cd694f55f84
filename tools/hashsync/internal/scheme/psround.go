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

// syncPS is the parameter-server data path of zen, bp-coo and sparse-ps:
// push COO partitions to their servers, aggregate in rank order, pull.
//
// The pull is a pipeline. Once every push is in, the server knows which
// of its rows it will return (the union of the rows pushed to it, 𝕌) and
// sends that set at once, as the head of its pull message (hash bitmap or
// row indices). It then sums its partition chunk by chunk (position
// ranges of its set, in rank order within each row) straight into the
// pull body, and sends each chunk as soon as it is summed. A receiver
// that has every server's head knows every run of rows of the ascending
// result, so it merges the runs front to back as their chunks land, up to
// the smallest row still on the wire (merger): summing, sending,
// receiving and merging overlap, and the result is complete when the last
// chunk is in. Rows whose sum is zero travel
// (the set is fixed before the sums are known) and are dropped from a
// sparse result by Sync's Compact.
func (s *Syncer) syncPS(p *Prepared) (*Tensor, error) {
	r, err := s.newPSRound(p)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := r.push(); err != nil {
		return nil, err
	}
	t1 := time.Now()
	r.st.Times["push"] = t1.Sub(t0).Seconds()
	r.union()
	r.preparePull()
	if r.dense == nil && len(r.all) == 0 {
		r.layout() // no heads to wait for
	}
	// The exchange runs while this goroutine sums the chunks: each
	// sender waits for a chunk to be summed before sending it.
	done := make(chan error, 1)
	go func() { done <- r.exchangePull() }()
	r.sum()
	t2 := time.Now()
	r.st.Times["aggregate"] = t2.Sub(t1).Seconds()
	if err := <-done; err != nil {
		return nil, err
	}
	t3 := time.Now()
	r.st.Times["pull"] = t3.Sub(t1).Seconds()
	// Every push is sent and summed: their buffers serve the next steps.
	for j, m := range p.push {
		s.bodies.put(m.body)
		p.push[j].body = nil
	}
	p.local.body = nil
	out, err := r.result()
	if err != nil {
		return nil, err
	}
	r.st.Times["decode"] = time.Since(t3).Seconds()
	return out, nil
}

// psRound is one tensor's trip through syncPS. This rank is a server (it
// receives the pushes of its partition, sums them and sends the pull) and
// a receiver (it takes every server's pull and merges the rows into the
// result); the fields are grouped by those roles.
type psRound struct {
	s      *Syncer
	p      *Prepared
	t      *Tensor
	st     *Stats
	lay    layout
	hashed bool
	prof   *profile // the profile scheme's counters, else nil
	w      int      // row width
	n, me  int      // world and this rank
	all    []int    // the other ranks
	S      int      // positions in this server's universe

	// Server: each push's rows as positions in this server's universe and
	// their values, per rank.
	posOf [][]int32
	vals  [][]float32
	// Server: 𝕌 (the union of the pushed rows) as a bitmap over
	// positions, its prefix popcounts, its size, and the pull's K chunks:
	// chunk c holds 𝕌's ranks cb[c] ≤ u < cb[c+1].
	U    []uint64
	pre  []int32
	nnz  int
	K    int
	cb   []int
	clo  []int  // chunk c holds positions clo[c] ≤ pos < clo[c+1]
	body []byte // the pull's values, summed chunk by chunk
	mine []uint32
	pull message
	// ready[c] closes once chunk c is summed (its send may start).
	ready []chan struct{}

	// Receiver: rows and chunk bounds of every server's run, the dense
	// output (written in place) or the merger (built once every head is
	// in), and which chunks have landed and been handed to the merger.
	dense      []float32
	runIdx     [][]uint32
	runCB      [][]int
	pullCounts []int
	chunk      [][][]float32
	heads      atomic.Int32
	mu         sync.Mutex // guards mg, in, added
	mg         *merger
	in         []int // chunks of each run in
	added      []int // chunks of each run handed to the merger
}

func (s *Syncer) newPSRound(p *Prepared) (*psRound, error) {
	t := p.T
	hashed := p.scheme != "sparse-ps"
	lay, err := s.layoutFor(t, hashed)
	if err != nil {
		return nil, err
	}
	n, me := s.n, s.r
	r := &psRound{s: s, p: p, t: t, st: &p.stats, lay: lay, hashed: hashed, w: t.Width, n: n, me: me,
		all: others(n, me), S: lay.size(me), posOf: make([][]int32, n), vals: make([][]float32, n),
		dense: p.DenseOut, runIdx: make([][]uint32, n), runCB: make([][]int, n), pullCounts: make([]int, n),
		chunk: make([][][]float32, n), in: make([]int, n), added: make([]int, n)}
	if p.scheme == "profile" {
		r.prof = newProfile(n)
	}
	if len(s.dupBits) != n {
		s.dupBits = make([][]uint64, n)
	}
	return r, nil
}

// push sends every partition to its server and takes this server's
// partitions in, its own included.
func (r *psRound) push() error {
	if err := r.toPos(r.me, r.p.local); err != nil {
		return err
	}
	s, p := r.s, r.p
	_, err := s.exchangeThen(s.phase("push"), opPush, r.all, func(q int) message { return p.push[q] }, r.all,
		func(q int, f uint32, nnz uint64) (int, error) {
			if f != fmtCOO || nnz > uint64(r.S) {
				return 0, fmt.Errorf("push: format %d with %d rows for a partition of %d rows", f, nnz, r.S)
			}
			return int(nnz) * (4 + 4*r.w), nil
		}, r.toPos, s.recvBufs(opPush))
	return err
}

// toPos turns q's push into positions in this server's universe as it
// arrives, checking that each row belongs here and comes once (a bitmap
// per message, kept for the union).
func (r *psRound) toPos(q int, m message) error {
	s := r.s
	k := int(m.n)
	idx := tensor.Uint32sOrCopy(m.body[:4*k])
	if cap(s.posBuf[q]) < k {
		s.posBuf[q] = make([]int32, k+k/8)
	}
	pos := s.posBuf[q][:k]
	nw := (r.S + 63) / 64
	if cap(s.dupBits[q]) < nw {
		s.dupBits[q] = make([]uint64, nw)
	}
	dup := s.dupBits[q][:nw]
	clear(dup)
	for i, x := range idx {
		t, ok := r.lay.pos(r.me, x)
		if !ok {
			return fmt.Errorf("row %d does not belong to partition %d", x, r.me)
		}
		if dup[t>>6]&(1<<(t&63)) != 0 {
			return fmt.Errorf("row %d (entry %d) is sent twice", x, i)
		}
		dup[t>>6] |= 1 << (t & 63)
		pos[i] = int32(t)
	}
	r.posOf[q], r.vals[q] = pos, tensor.Float32sOrCopy(m.body[4*k:])
	return nil
}

// union computes 𝕌 over this server's positions, each position's rank in
// it, and the pull's chunk bounds: chunk c covers positions
// [c·S/K, (c+1)·S/K).
func (r *psRound) union() {
	s := r.s
	nw := (r.S + 63) / 64
	if cap(s.union) < nw {
		s.union, s.unionPre = make([]uint64, nw), make([]int32, nw)
	}
	r.U, r.pre = s.union[:nw], s.unionPre[:nw]
	clear(r.U)
	for q := range r.n {
		if r.prof != nil {
			r.prof.rowsFrom[q] = len(r.posOf[q])
		}
		for k, x := range s.dupBits[q][:nw] {
			r.U[k] |= x
		}
	}
	r.nnz = 0
	for k, x := range r.U {
		r.pre[k] = int32(r.nnz)
		r.nnz += bits.OnesCount64(x)
	}
	r.K = pullChunks(r.nnz, r.w)
	r.cb = make([]int, r.K+1)
	r.clo = make([]int, r.K+1)
	for c := range r.K {
		lo := chunkLo(r.S, r.K, c)
		r.clo[c] = lo
		if lo < r.S {
			r.cb[c] = r.rankU(lo)
		} else {
			r.cb[c] = r.nnz
		}
	}
	r.cb[r.K], r.clo[r.K] = r.nnz, r.S
}

// rankU is the rank in 𝕌 of position pos.
func (r *psRound) rankU(pos int) int {
	return int(r.pre[pos>>6]) + bits.OnesCount64(r.U[pos>>6]&(1<<(pos&63)-1))
}

// preparePull lays out the pull message: its head (𝕌 as a hash bitmap or
// as row indices), its body (summed later, chunk by chunk) and the
// chunks' sizes and readiness.
func (r *psRound) preparePull() {
	s := r.s
	useBitmap := false
	if r.p.scheme == "zen" || r.p.scheme == "profile" {
		switch s.cfg.Pull {
		case "bitmap":
			useBitmap = true
		case "auto":
			useBitmap = zen.BitmapBytes(r.S) < 4*r.nnz
		}
	}
	headLen := 4 * r.nnz
	if useBitmap {
		headLen = zen.BitmapBytes(r.S)
	}
	bodyLen := r.nnz * 4 * r.w
	if cap(s.pullBody) < bodyLen+headLen {
		s.pullBody = make([]byte, bodyLen+headLen+(bodyLen+headLen)/8)
	}
	body, head := s.pullBody[:bodyLen], s.pullBody[bodyLen:bodyLen+headLen]
	r.body = body
	r.mine = r.unionRows()
	r.pull = message{n: uint64(r.nnz), head: head, body: body, chunks: make([]int, r.K)}
	if useBitmap {
		var b [8]byte
		for k, x := range r.U {
			binary.LittleEndian.PutUint64(b[:], x)
			copy(head[8*k:], b[:])
		}
		r.pull.fmt = fmtBitmap
	} else {
		idx, flush := tensor.WritableUint32s(head)
		copy(idx, r.mine)
		flush()
		r.pull.fmt = fmtCOO
	}
	r.ready = make([]chan struct{}, r.K)
	for c := range r.K {
		r.pull.chunks[c] = (r.cb[c+1] - r.cb[c]) * 4 * r.w
		r.ready[c] = make(chan struct{})
	}
	r.pull.ready = func(c int) { <-r.ready[c] }
	r.runIdx[r.me], r.runCB[r.me], r.pullCounts[r.me] = r.mine, r.cb, r.nnz
	r.chunk[r.me] = make([][]float32, r.K)
}

// unionRows lists 𝕌's rows in position order (this server's run).
func (r *psRound) unionRows() []uint32 {
	s := r.s
	if cap(s.mineIdx) < r.nnz {
		s.mineIdx = make([]uint32, r.nnz+r.nnz/8)
	}
	mine := s.mineIdx[:r.nnz]
	u := 0
	for k, x := range r.U {
		for x != 0 {
			mine[u] = r.lay.at(r.me, k<<6+bits.TrailingZeros64(x))
			u++
			x &= x - 1
		}
	}
	return mine
}

// exchangePull sends this server's pull to every rank and receives
// theirs: heads first (onHead), then chunks as they are summed (onChunk).
func (r *psRound) exchangePull() error {
	s := r.s
	_, err := s.exchangeSplit(s.phase("pull"), opPull, r.all, func(int) message { return r.pull }, r.all,
		r.pullSizes, r.onHead, nil, s.recvBufs(opPullHead), s.recvBufs(opPull), r.recvChunks, r.onChunk)
	return err
}

// pullSizes bounds server q's announced pull: its head and body sizes.
func (r *psRound) pullSizes(q int, f uint32, nnz uint64) (int, int, error) {
	size := r.lay.size(q)
	if nnz > uint64(size) {
		return 0, 0, fmt.Errorf("pull: %d rows for a partition of %d rows", nnz, size)
	}
	switch f {
	case fmtCOO:
		return int(nnz) * 4, int(nnz) * 4 * r.w, nil
	case fmtBitmap:
		if !r.hashed && r.p.scheme != "profile" {
			break
		}
		return zen.BitmapBytes(size), int(nnz) * 4 * r.w, nil
	}
	return 0, 0, fmt.Errorf("pull: format %d", f)
}

// recvChunks is the sizes of server q's pull chunks, known from its head.
func (r *psRound) recvChunks(q int, _ message) []int {
	b := r.runCB[q]
	l := make([]int, len(b)-1)
	for c := range l {
		l[c] = (b[c+1] - b[c]) * 4 * r.w
	}
	return l
}

func (r *psRound) onChunk(q, c int, v []byte) error {
	r.landed(q, c, tensor.Float32sOrCopy(v))
	return nil
}

// onHead decodes server q's pull head into its run of rows (ascending by
// position) and the run's chunk bounds; the last head in builds the
// merger.
func (r *psRound) onHead(q int, m message) error {
	k := int(m.n)
	r.pullCounts[q] = k
	if cap(r.s.runIdx[q]) < k {
		r.s.runIdx[q] = make([]uint32, k+k/8)
	}
	cut := newRunCutter(r.lay.size(q), pullChunks(k, r.w), r.s.runIdx[q][:0])
	var err error
	if m.fmt == fmtBitmap {
		h, ok := r.lay.(hashLayout)
		if !ok {
			return fmt.Errorf("a hash bitmap pull head for %s, whose rows are not hashed", r.p.scheme)
		}
		err = cut.bitmap(m.head, k, h.t.Set(q))
	} else {
		err = cut.rows(tensor.Uint32sOrCopy(m.head), func(x uint32) (int, bool) { return r.lay.pos(q, x) }, q)
	}
	if err != nil {
		return err
	}
	cut.finish()
	r.runIdx[q], r.runCB[q] = cut.l, cut.b
	r.chunk[q] = make([][]float32, cut.K)
	if r.dense == nil && r.heads.Add(1) == int32(len(r.all)) {
		r.layout()
	}
	return nil
}

// runCutter builds a server's run of rows from its pull head and cuts it
// into the server's chunks: b[c] is where chunk c starts in l.
type runCutter struct {
	size, K int // the server's universe and its chunk count
	c       int // the chunk being filled
	hi      int // the end of chunk c, in positions
	l       []uint32
	b       []int
}

func newRunCutter(size, K int, l []uint32) runCutter {
	_, hi := collective.Chunk(size, K, 0)
	return runCutter{size: size, K: K, hi: hi, l: l, b: make([]int, K+1)}
}

// next advances the chunk bounds to position t, which is the position of
// run entry o.
func (u *runCutter) next(t, o int) {
	for u.c < u.K && t >= u.hi {
		u.c++
		u.b[u.c] = o
		_, u.hi = collective.Chunk(u.size, u.K, u.c)
	}
}

// bitmap reads a hash bitmap head over set, the server's rows (ascending,
// size of them): bit t names set[t]; k bits must be set.
func (u *runCutter) bitmap(bm []byte, k int, set []uint32) error {
	if len(set) != u.size || len(bm) != zen.BitmapBytes(u.size) {
		return fmt.Errorf("hash bitmap of %d bytes for a partition of %d rows", len(bm), u.size)
	}
	if r := u.size % 8; r != 0 && len(bm) > 0 && bm[len(bm)-1]>>r != 0 {
		return fmt.Errorf("hash bitmap sets bits past row %d of the partition", u.size)
	}
	n := 0
	for i := 0; i < len(bm); i += 8 {
		n += bits.OnesCount64(word(bm, i))
	}
	if n != k {
		return fmt.Errorf("hash bitmap has %d bits set for %d rows", n, k)
	}
	l := slices.Grow(u.l[:0], k)[:k]
	o := 0
	for i := 0; i < len(bm); i += 8 {
		for x := word(bm, i); x != 0; x &= x - 1 {
			t := i*8 + bits.TrailingZeros64(x)
			u.next(t, o)
			l[o] = set[t]
			o++
		}
	}
	u.l = l
	return nil
}

// word returns the up to 8 bytes of b from i, little-endian.
func word(b []byte, i int) uint64 {
	if i+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[i:])
	}
	var x uint64
	for k, v := range b[i:] {
		x |= uint64(v) << (8 * k)
	}
	return x
}

// rows reads a row-index head: rows of server q's partition, ascending.
func (u *runCutter) rows(idx []uint32, pos func(uint32) (int, bool), q int) error {
	prev := -1
	for i, x := range idx {
		t, ok := pos(x)
		if !ok || t <= prev {
			return fmt.Errorf("row %d (entry %d) is not in partition %d or not ascending", x, i, q)
		}
		prev = t
		u.next(t, len(u.l))
		u.l = append(u.l, x)
	}
	return nil
}

// finish closes the chunks past the last row.
func (u *runCutter) finish() {
	for u.c < u.K {
		u.c++
		u.b[u.c] = len(u.l)
	}
}

// landed records chunk c of run q and hands it to the merger once the
// merger exists (every chunk of a run lands in order); a dense output
// takes it at once.
func (r *psRound) landed(q, c int, v []float32) {
	r.chunk[q][c] = v
	if r.dense != nil {
		lo, hi := r.runCB[q][c], r.runCB[q][c+1]
		scatterRows(r.dense, r.w, list{r.runIdx[q][lo:hi], v})
		return
	}
	r.mu.Lock()
	r.in[q] = c + 1
	g := r.mg
	if g != nil {
		g.add(q, c, v)
		r.added[q] = c + 1
	}
	r.mu.Unlock()
	if g != nil {
		g.merge()
	}
}

// layout builds the merger once every head is in and hands it the chunks
// already landed.
func (r *psRound) layout() {
	g := newMerger(r.t.Name, r.t.Rows, r.w, r.runIdx, r.runCB, &r.s.results)
	r.mu.Lock()
	r.mg = g
	for q := range r.n {
		for c := r.added[q]; c < r.in[q]; c++ {
			g.add(q, c, r.chunk[q][c])
		}
		r.added[q] = r.in[q]
	}
	r.mu.Unlock()
	g.merge()
}

// sum adds the pushes chunk by chunk into the pull body, each row's
// contributions in rank order from 0 (as the reference sum does), and
// releases each chunk to the senders as soon as it is summed.
func (r *psRound) sum() {
	var seen []uint64
	if r.prof != nil {
		seen = make([]uint64, (r.nnz+63)/64)
	}
	order, from := r.byChunk()
	w := r.w
	for c := range r.K {
		v, flush := tensor.WritableFloat32s(r.body[r.cb[c]*4*w : r.cb[c+1]*4*w])
		clear(v)
		base := r.cb[c]
		for q := range r.n {
			ps, src := r.posOf[q], r.vals[q]
			for _, k := range order[q][from[q][c]:from[q][c+1]] {
				u := r.rankU(int(ps[k]))
				if seen != nil && seen[u>>6]&(1<<(u&63)) == 0 {
					seen[u>>6] |= 1 << (u & 63)
					r.prof.newRows[q]++
				}
				u -= base
				addRow(v[u*w:u*w+w], src[int(k)*w:int(k)*w+w])
			}
		}
		flush()
		close(r.ready[c])
		r.landed(r.me, c, v)
	}
}

// byChunk buckets each push's entries by pull chunk (a counting pass:
// pushes need not be in position order): order[q] lists q's entries chunk
// by chunk, and from[q][c] is where chunk c starts in it.
func (r *psRound) byChunk() (order, from [][]int32) {
	order, from = make([][]int32, r.n), make([][]int32, r.n)
	for q := range r.n {
		posOf := r.posOf[q]
		if cap(r.s.order[q]) < len(posOf) {
			r.s.order[q] = make([]int32, len(posOf)+len(posOf)/8)
		}
		o, f := r.s.order[q][:len(posOf)], make([]int32, r.K+1)
		for _, pos := range posOf {
			f[r.chunkOf(int(pos))+1]++
		}
		for c := range r.K {
			f[c+1] += f[c]
		}
		at := slices.Clone(f[:r.K])
		for k, pos := range posOf {
			c := r.chunkOf(int(pos))
			o[at[c]] = int32(k)
			at[c]++
		}
		order[q], from[q] = o, f
	}
	return order, from
}

// chunkOf is the pull chunk holding position pos.
func (r *psRound) chunkOf(pos int) int {
	c := pos * r.K / r.S
	for c > 0 && pos < r.clo[c] {
		c--
	}
	for c+1 < r.K && pos >= r.clo[c+1] {
		c++
	}
	return c
}

// result is the synced tensor: the dense output already written in place
// (listing the rows written), or the merger's, every chunk merged as the
// watermark passed it.
func (r *psRound) result() (*Tensor, error) {
	var out *Tensor
	if r.dense != nil {
		out = &Tensor{Name: r.t.Name, Rows: r.t.Rows, Width: r.w, DenseVal: r.dense}
		total := 0
		for _, l := range r.runIdx {
			total += len(l)
		}
		out.Idx = make([]uint32, 0, total)
		for _, l := range r.runIdx {
			out.Idx = append(out.Idx, l...)
		}
	} else {
		var err error
		if out, err = r.mg.done(); err != nil {
			return nil, err
		}
	}
	r.st.PullImbalance = imbalance(r.pullCounts)
	if r.prof != nil {
		r.st.profile = r.prof
		r.prof.outRows = out.Nnz()
	}
	return out, nil
}
