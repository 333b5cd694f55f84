package scheme

import (
	"slices"

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
	// 𝕀_j's membership bitmap and prefix counts (12 bytes per 64 rows,
	// in cache) rather than the rank map (4 bytes per row, a cache miss
	// per row on a 1M-row table).
	return h.t.Member[j].Pos(idx)
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
		body := s.bodies.get(c * (4 + 4*w))
		idx, flushIdx := tensor.WritableUint32s(body[:4*c])
		val, flushVal := tensor.WritableFloat32s(body[4*c:])
		if part != nil {
			for i, k := range part {
				idx[i] = t.Idx[k]
				copyRow(val[i*w:i*w+w], t.Val[int(k)*w:int(k)*w+w])
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
		if !s.gatherOnce(p, parts, counts) {
			for j := range n {
				part := parts.Part(j)
				counts[j] = len(part)
				encode(j, part, 0, 0)
			}
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

// gatherOnce writes every part's push message in one pass over the
// gradient in row order, each row to its part's message (the row order
// within a part, which the servers do not depend on, becomes ascending).
// Gathering part by part instead read the gradient four times, each time a
// quarter of its rows scattered over it: a cache miss per row, 76 ns a row
// in BenchmarkZenDeepFM's profile. It returns false, having written
// nothing, when the parts do not cover every row exactly once.
func (s *Syncer) gatherOnce(p *Prepared, parts *zen.Parts, counts []int) bool {
	t, n, w := p.T, s.n, p.T.Width
	nnz := len(t.Idx)
	if len(parts.Pos) != nnz || n > 1<<15 {
		return false
	}
	if cap(s.owner) < nnz {
		s.owner = make([]int16, nnz+nnz/8)
	}
	owner := s.owner[:nnz]
	for i := range owner {
		owner[i] = -1
	}
	for j := range n {
		part := parts.Part(j)
		counts[j] = len(part)
		for _, k := range part {
			if k < 0 || int(k) >= nnz || owner[k] >= 0 {
				return false
			}
			owner[k] = int16(j)
		}
	}
	idx, val := make([][]uint32, n), make([][]float32, n)
	flush := make([]func(), 0, 2*n)
	for j := range n {
		c := counts[j]
		body := s.bodies.get(c * (4 + 4*w))
		var fi, fv func()
		idx[j], fi = tensor.WritableUint32s(body[:4*c])
		val[j], fv = tensor.WritableFloat32s(body[4*c:])
		flush = append(flush, fi, fv)
		p.push[j] = message{fmt: fmtCOO, n: uint64(c), body: body}
	}
	at := make([]int, n)
	for k, i := range t.Idx {
		j := owner[k]
		c := at[j]
		at[j]++
		idx[j][c] = i
		copyRow(val[j][c*w:c*w+w], t.Val[k*w:k*w+w])
	}
	for _, f := range flush {
		f()
	}
	return true
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
		copyRow(dense[int(i)*w:int(i)*w+w], l.val[k*w:k*w+w])
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
