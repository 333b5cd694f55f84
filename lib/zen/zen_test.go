package zen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reference vectors of seed-zen.md §3.6 (the first and the 0xFFFFFFFF ones
// are SMHasher's).
func TestMM3Vectors(t *testing.T) {
	for _, c := range []struct{ key, seed, want uint32 }{
		{0, 0, 0x2362F9DE}, {1, 0, 0xFBF1402A}, {2, 0, 0x40B23B7F}, {1000, 0, 0xFFCA7F79},
		{0xFFFFFFFF, 0, 0x76293B50}, {1, 1, 0x5E11E574}, {1, 42, 0xDEA578E3},
	} {
		assert.Equal(t, c.want, MM3(c.key, c.seed), "mm3(%#x, %d)", c.key, c.seed)
	}
}

func uniqueSorted(rng *rand.Rand, m, universe int) []uint32 {
	set := map[uint32]bool{}
	for len(set) < m {
		set[uint32(rng.IntN(universe))] = true
	}
	out := make([]uint32, 0, m)
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// sets returns each part's indices, sorted.
func sets(idx []uint32, p *Parts) [][]uint32 {
	out := make([][]uint32, p.N())
	for j := range p.N() {
		for _, pos := range p.Part(j) {
			out[j] = append(out[j], idx[pos])
		}
		slices.Sort(out[j])
	}
	return out
}

// R2: hierarchical hashing is a disjoint cover of I, each index in part
// h0(idx), with many goroutines (run under -race) and with memory so small
// that serial memory overflows; R8: overflow is counted, never lost.
func TestHashDisjointCover(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		m, n, workers int
		C, R2         float64
		overflow      bool
	}{
		{20000, 8, 4, 2, 0.1, false},
		{20000, 8, 4, 1, 0.1, true}, // c = 1 overflows serial memory (§3.5)
		{5000, 3, 8, 0.02, 0.01, true},
		{1, 1, 1, 2, 0.1, false},
		{0, 4, 2, 2, 0.1, false},
	} {
		idx := uniqueSorted(rng, c.m, 1<<24)
		seeds := DefaultSeeds(5, 3)
		var h Hasher
		p, err := h.Hash(idx, HashConfig{N: c.n, Seeds: seeds, C: c.C, R2: c.R2, Workers: c.workers})
		require.NoError(t, err)
		seen := make([]bool, c.m)
		for j := range c.n {
			for _, pos := range p.Part(j) {
				require.False(t, seen[pos], "index %d twice", idx[pos])
				seen[pos] = true
				require.Equal(t, j, H0(idx[pos], seeds[0], c.n))
			}
		}
		for pos, s := range seen {
			require.True(t, s, "index %d lost", idx[pos])
		}
		if c.overflow {
			assert.Positive(t, p.Overflow, "m=%d c=%g", c.m, c.C)
		} else if c.m > 1000 {
			assert.Zero(t, p.Overflow)
			// §3.5: at c = 2, k = 3 about 2.9% of the writes are serial.
			assert.InDelta(t, 0.029, float64(p.Serial)/float64(c.m), 0.01)
		}
		// The counting sort gives the same sets (§7.3).
		var b Bucketer
		q := b.Bucket(idx, c.n, seeds[0], c.workers)
		assert.Equal(t, sets(idx, p), sets(idx, q))
	}
}

// T6 (serial fraction vs c and k, §3.5 table; n = 16, m = 100,000).
func TestSerialFraction(t *testing.T) {
	idx := uniqueSorted(rand.New(rand.NewPCG(3, 4)), 100_000, 1<<30)
	frac := func(c float64, k int) float64 {
		var h Hasher
		p, err := h.Hash(idx, HashConfig{N: 16, Seeds: DefaultSeeds(1, k), C: c, R2: 0.1, Workers: 1})
		require.NoError(t, err)
		return float64(p.Serial) / float64(len(idx))
	}
	for _, c := range []struct {
		c    float64
		k    int
		want float64
	}{{1, 1, 0.368}, {2, 1, 0.212}, {2, 3, 0.029}, {2, 4, 0.012}, {4, 3, 0.0037}} {
		assert.InDelta(t, c.want, frac(c.c, c.k), c.want*0.15+0.001, "c=%g k=%d", c.c, c.k)
	}
}

// Fig. 9's parameters: n = 3, k = 2, r1 = 4, r2 = 3.
func TestFig9Parameters(t *testing.T) {
	cfg := HashConfig{N: 3, Seeds: DefaultSeeds(0, 2), C: 2, R2: 0.75}
	r1, r2 := cfg.Sizes(6)
	assert.Equal(t, 4, r1)
	assert.Equal(t, 3, r2)
	idx := []uint32{1, 2, 3, 5, 8, 13}
	var h Hasher
	p, err := h.Hash(idx, cfg)
	require.NoError(t, err)
	assert.Equal(t, 6, len(p.Pos))
}

// R3, R6, R7: the sets are a sorted partition of [0, |G|) by h0; their
// sizes sum to |G| (so the hash bitmaps total |G| bits whatever n).
func TestTable(t *testing.T) {
	for _, c := range []struct{ rows, n int }{{15, 3}, {1000, 7}, {100_003, 16}, {5, 8}, {0, 2}} {
		tb := NewTable(c.rows, c.n, 11, 3)
		total := 0
		for j := range c.n {
			s := tb.Set(j)
			total += len(s)
			assert.True(t, slices.IsSorted(s))
			for r, idx := range s {
				assert.Equal(t, j, H0(idx, 11, c.n))
				assert.Equal(t, uint32(r), tb.Rank[idx])
			}
		}
		// Every row against every membership: in 𝕀_j exactly when h0 says
		// so, at its rank there; rows past the table are in none.
		for idx := range uint32(c.rows) + 70 {
			for j := range c.n {
				pos, in := tb.Member[j].Pos(idx)
				want := int(idx) < c.rows && H0(idx, 11, c.n) == j
				require.Equal(t, want, in, "row %d, set %d", idx, j)
				if in {
					require.Equal(t, int(tb.Rank[idx]), pos, "row %d, set %d", idx, j)
				}
			}
		}
		assert.Equal(t, c.rows, total)
		bits := 0
		for j := range c.n {
			bits += tb.Size(j)
		}
		assert.Equal(t, c.rows, bits)
	}
	a, _ := TableFor(1000, 4, 9)
	b, _ := TableFor(1000, 4, 9)
	assert.Same(t, a, b, "cached")
}

// R5, T7: Fig. 10 — 𝕀_0 = {…, 5, 7, …} with 5 and 7 its 2nd and 3rd
// elements (0-based positions 2, 3 as printed): bits 2 and 3 decode to
// {5, 7}.
func TestFig10HashBitmap(t *testing.T) {
	set := []uint32{0, 3, 5, 7, 12}
	bm := HashBitmapEncode(set, func(i uint32) bool { return i == 5 || i == 7 })
	assert.Equal(t, []byte{0b1100}, bm)
	got, err := HashBitmapDecode(set, bm)
	require.NoError(t, err)
	assert.Equal(t, []uint32{5, 7}, got)
}

func TestBitmapRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, nbits := range []int{0, 1, 7, 8, 9, 63, 64, 65, 1000} {
		for _, d := range []float64{0, 0.03, 0.5, 1} {
			b := NewBitmap(nbits)
			var want []int32
			for i := range nbits {
				if rng.Float64() < d {
					b.Set(i)
					want = append(want, int32(i))
				}
			}
			enc := make([]byte, BitmapBytes(nbits))
			b.Encode(enc, nbits)
			got, err := DecodeBitmap(nil, enc, nbits)
			require.NoError(t, err)
			assert.Equal(t, want, got, "nbits %d", nbits)
			assert.Equal(t, len(want), b.Count())
		}
	}
	_, err := DecodeBitmap(nil, []byte{0xFF}, 5)
	assert.ErrorContains(t, err, "past bit 5")
	_, err = DecodeBitmap(nil, []byte{0, 0}, 5)
	assert.Error(t, err)
}

func FuzzDecodeBitmap(f *testing.F) {
	f.Add([]byte{0b1100}, 5)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, bm []byte, nbits int) {
		if nbits < 0 || nbits > 1<<16 {
			return
		}
		pos, err := DecodeBitmap(nil, bm, nbits)
		if err != nil {
			return
		}
		b := NewBitmap(nbits)
		for _, p := range pos {
			if int(p) >= nbits {
				t.Fatalf("position %d past %d bits", p, nbits)
			}
			b.Set(int(p))
		}
		enc := make([]byte, BitmapBytes(nbits))
		b.Encode(enc, nbits)
		if string(enc) != string(bm) {
			t.Fatalf("round trip changed the bitmap")
		}
	})
}

// T5 (seed-zen.md §3.2): Algorithm 3 loses L(α) = 1 − (1 − e^{−α})/α of
// m distinct indices at load α = m/(n·r); every survivor sits in the
// partition of its hash, once.
func TestStrawmanLoss(t *testing.T) {
	const m, n = 100_000, 16
	idx := uniqueSorted(rand.New(rand.NewPCG(5, 6)), m, 1<<30)
	for _, c := range []struct{ alpha, want float64 }{
		{0.01, 0.0050}, {0.05, 0.0246}, {0.1, 0.0484}, {0.25, 0.1152}, {0.5, 0.2131}, {1.0, 0.3679},
	} {
		r := int(math.Round(m / c.alpha / n))
		alpha := float64(m) / float64(n*r)
		L := 1 - (1-math.Exp(-alpha))/alpha
		assert.InDelta(t, c.want, L, 0.0005, "L(%g) against the spec's table", c.alpha)
		p, lost, err := Strawman(idx, n, r, 43)
		require.NoError(t, err)
		// The lost count is a sum of weakly dependent indicators: within 5
		// standard deviations of a binomial with that mean.
		sd := math.Sqrt(float64(m) * L * (1 - L))
		assert.InDelta(t, L*m, float64(lost), 5*sd+1, "α = %g", alpha)
		assert.Equal(t, m-lost, len(p.Pos))
		seen := map[int32]bool{}
		for j := range n {
			for _, pos := range p.Part(j) {
				h := int(Reduce(MM3(idx[pos], 43), uint32(n*r)))
				assert.Equal(t, j, h/r, "index %d in the wrong partition", idx[pos])
				assert.False(t, seen[pos])
				seen[pos] = true
			}
		}
	}
	_, _, err := Strawman(idx, 0, 4, 1)
	assert.Error(t, err)
}
