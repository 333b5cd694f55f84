package scheme

import (
	"testing"

	"trainwire.dev/lib/collective"
)

// FuzzPullHead decodes a peer's pull head (a hash bitmap over the
// server's rows, or its row indices) as onHead does, and checks every
// accepted head against a bit-by-bit reading: the rows it names, in
// order, cut at the server's chunk bounds. Nothing may panic.
func FuzzPullHead(f *testing.F) {
	f.Add([]byte{0b1011, 0x80}, uint16(12), uint8(4), uint8(3))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint16(65), uint8(65), uint8(8))
	f.Add([]byte{}, uint16(0), uint8(0), uint8(1))
	f.Fuzz(func(t *testing.T, bm []byte, size uint16, k, K uint8) {
		if K == 0 {
			return
		}
		set := make([]uint32, size)
		for i := range set {
			set[i] = uint32(3*i + 1)
		}
		u := newRunCutter(int(size), int(K), make([]uint32, 0, int(k)+1))
		err := u.bitmap(bm, int(k), set)
		if len(bm) != (int(size)+7)/8 {
			if err == nil {
				t.Fatalf("accepted a %d-byte bitmap for %d rows", len(bm), size)
			}
			return
		}
		var want []uint32
		var at []int
		for i := range 8 * len(bm) {
			if bm[i/8]>>(i%8)&1 != 0 {
				if i >= int(size) {
					if err == nil {
						t.Fatalf("accepted bit %d of a %d-row partition", i, size)
					}
					return
				}
				want, at = append(want, set[i]), append(at, i)
			}
		}
		if len(want) != int(k) {
			if err == nil {
				t.Fatalf("accepted %d bits for %d rows", len(want), k)
			}
			return
		}
		if err != nil {
			t.Fatalf("refused a valid head: %v", err)
		}
		u.finish()
		for o, x := range u.l {
			if x != want[o] {
				t.Fatalf("entry %d: row %d, want %d", o, x, want[o])
			}
		}
		for c := range int(K) {
			lo, hi := collective.Chunk(int(size), int(K), c)
			for o := u.b[c]; o < u.b[c+1]; o++ {
				if at[o] < lo || at[o] >= hi {
					t.Fatalf("entry %d (position %d) cut into chunk %d [%d, %d)", o, at[o], c, lo, hi)
				}
			}
		}
		if u.b[0] != 0 || u.b[K] != int(k) {
			t.Fatalf("chunk bounds %v for %d entries", u.b, k)
		}
	})
}
