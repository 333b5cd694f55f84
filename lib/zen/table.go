package zen

import (
	"fmt"
	"math/bits"
	"sync"
)

// Table holds the sorted index sets 𝕀_j = {idx < Rows | h0(idx) = j} of
// the n servers, and the rank map idx → position of idx in its set. It is
// built once per (Rows, N, seed) by one counting-sort pass and cached;
// memory 8·Rows bytes (4 for the sets, 4 for the rank map) and 12·N bytes
// per 64 rows (the memberships).
type Table struct {
	Rows int
	N    int
	Seed uint32
	// Off[j]..Off[j+1] delimits 𝕀_j in Sets.
	Off  []int
	Sets []uint32
	// Rank[idx] is the position of idx within 𝕀_{h0(idx)}.
	Rank []uint32
	// Member[j] is 𝕀_j as a bitmap over all rows (Pos).
	Member []Membership
}

// Membership is one server's set 𝕀_j as a bitmap over all rows, with the
// count of its members before each 64-row word: whether a row is in 𝕀_j,
// and its position there, in 12 bytes per 64 rows (190 KB for 1M rows)
// where the rank map takes 4 bytes per row (4 MB), so the lookups of a
// server's incoming rows stay in cache.
type Membership struct {
	words []uint64
	pre   []uint32
}

// Pos returns the position of idx in the set and whether idx is in it.
func (m *Membership) Pos(idx uint32) (int, bool) {
	k := idx >> 6
	if int(k) >= len(m.words) {
		return 0, false
	}
	w := m.words[k]
	return int(m.pre[k]) + bits.OnesCount64(w&(1<<(idx&63)-1)), w>>(idx&63)&1 != 0
}

// newMembership builds the membership of the ascending set of rows.
func newMembership(rows int, set []uint32) Membership {
	m := Membership{words: make([]uint64, (rows+63)/64), pre: make([]uint32, (rows+63)/64)}
	for _, i := range set {
		m.words[i>>6] |= 1 << (i & 63)
	}
	acc := uint32(0)
	for k, w := range m.words {
		m.pre[k] = acc
		acc += uint32(bits.OnesCount64(w))
	}
	return m
}

// Set returns 𝕀_j, ascending.
func (t *Table) Set(j int) []uint32 { return t.Sets[t.Off[j]:t.Off[j+1]] }

// Size returns |𝕀_j|.
func (t *Table) Size(j int) int { return t.Off[j+1] - t.Off[j] }

// Part returns h0(idx).
func (t *Table) Part(idx uint32) int { return H0(idx, t.Seed, t.N) }

type tableKey struct {
	rows, n int
	seed    uint32
}

var tableCache sync.Map // tableKey → *tableEntry

type tableEntry struct {
	once sync.Once
	t    *Table
}

// MaxRows is the largest tensor (in rows) the 32-bit indices address.
const MaxRows = 1 << 32

// TableFor returns the (cached) table for rows rows, n servers and h0 seed.
func TableFor(rows, n int, seed uint32) (*Table, error) {
	if rows < 0 || rows > MaxRows-1 || n < 1 {
		return nil, fmt.Errorf("zen: no table for %d rows and %d servers (32-bit row indices)", rows, n)
	}
	e, _ := tableCache.LoadOrStore(tableKey{rows, n, seed}, &tableEntry{})
	te := e.(*tableEntry)
	te.once.Do(func() { te.t = NewTable(rows, n, seed, 0) })
	return te.t, nil
}

// NewTable builds the table without the cache.
func NewTable(rows, n int, seed uint32, nworkers int) *Table {
	t := &Table{Rows: rows, N: n, Seed: seed, Off: make([]int, n+1), Sets: make([]uint32, rows), Rank: make([]uint32, rows)}
	nw := workers(nworkers, rows)
	hist := make([][]int, nw)
	// Pass 1: h0 of every row (kept in Rank for now) and histograms.
	forChunksIdx(rows, nw, func(w, lo, hi int) {
		h := make([]int, n)
		for i := lo; i < hi; i++ {
			j := Reduce(MM3(uint32(i), seed), uint32(n))
			t.Rank[i] = j
			h[j]++
		}
		hist[w] = h
	})
	start := make([][]int, nw)
	for w := range nw {
		start[w] = make([]int, n)
	}
	at := 0
	for j := range n {
		t.Off[j] = at
		for w := range nw {
			start[w][j] = at
			at += hist[w][j]
		}
	}
	t.Off[n] = at
	// Pass 2: stable scatter, so every set is ascending.
	forChunksIdx(rows, nw, func(w, lo, hi int) {
		s := start[w]
		for i := lo; i < hi; i++ {
			j := t.Rank[i]
			t.Sets[s[j]] = uint32(i)
			t.Rank[i] = uint32(s[j] - t.Off[j])
			s[j]++
		}
	})
	t.Member = make([]Membership, n)
	forChunksIdx(n, min(nw, n), func(_, lo, hi int) {
		for j := lo; j < hi; j++ {
			t.Member[j] = newMembership(rows, t.Set(j))
		}
	})
	return t
}

// BitmapBytes is the size of a bitmap of nbits bits.
func BitmapBytes(nbits int) int { return (nbits + 7) / 8 }

// Bitmap is a bitset over the positions of one server's set 𝕀_j.
type Bitmap []uint64

// NewBitmap returns an empty bitmap of nbits bits.
func NewBitmap(nbits int) Bitmap { return make(Bitmap, (nbits+63)/64) }

// Set sets bit t.
func (b Bitmap) Set(t int) { b[t>>6] |= 1 << (t & 63) }

// Has reports bit t.
func (b Bitmap) Has(t int) bool { return b[t>>6]>>(t&63)&1 != 0 }

// Count returns the number of set bits.
func (b Bitmap) Count() int {
	c := 0
	for _, w := range b {
		c += bits.OnesCount64(w)
	}
	return c
}

// Encode writes the bitmap as ceil(nbits/8) bytes, bit t in bit t%8 of
// byte t/8 (LSB first), into dst and returns the bytes written.
func (b Bitmap) Encode(dst []byte, nbits int) int {
	nb := BitmapBytes(nbits)
	for i := 0; i < nb; i++ {
		dst[i] = byte(b[i>>3] >> ((i & 7) * 8))
	}
	return nb
}

// ForEach calls fn for every set bit in ascending order.
func (b Bitmap) ForEach(fn func(t int)) {
	for wi, w := range b {
		for w != 0 {
			fn(wi<<6 + bits.TrailingZeros64(w))
			w &= w - 1
		}
	}
}

// DecodeBitmap checks an encoded bitmap of nbits bits (its length, no bit
// past nbits) and returns the positions of its set bits, ascending, appended
// to dst.
func DecodeBitmap(dst []int32, bm []byte, nbits int) ([]int32, error) {
	if len(bm) != BitmapBytes(nbits) {
		return dst, fmt.Errorf("hash bitmap of %d bytes for %d bits, want %d", len(bm), nbits, BitmapBytes(nbits))
	}
	if r := nbits % 8; r != 0 && bm[len(bm)-1]>>r != 0 {
		return dst, fmt.Errorf("hash bitmap sets bits past bit %d", nbits)
	}
	for i, c := range bm {
		for c != 0 {
			dst = append(dst, int32(i*8+bits.TrailingZeros8(c)))
			c &= c - 1
		}
	}
	return dst, nil
}

// HashBitmapEncode is Algorithm 2's encoder on one server's aggregated
// rows: bit t is set iff row set[t] is non-zero, where nonzero reports the
// rows present in the aggregate.
func HashBitmapEncode(set []uint32, nonzero func(idx uint32) bool) []byte {
	bm := make([]byte, BitmapBytes(len(set)))
	for t, idx := range set {
		if nonzero(idx) {
			bm[t>>3] |= 1 << (t & 7)
		}
	}
	return bm
}

// HashBitmapDecode is Algorithm 2's decoder: the global indices set[t] of
// the set bits t.
func HashBitmapDecode(set []uint32, bm []byte) ([]uint32, error) {
	pos, err := DecodeBitmap(nil, bm, len(set))
	if err != nil {
		return nil, err
	}
	out := make([]uint32, len(pos))
	for i, t := range pos {
		out[i] = set[t]
	}
	return out, nil
}
