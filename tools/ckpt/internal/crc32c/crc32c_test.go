package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

var tab = crc32.MakeTable(crc32.Castagnoli)

func TestCombine(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	cuts := []int{0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 4095, 4096, 65537, 1 << 19, 1<<20 - 1, 1 << 20}
	for _, a := range cuts {
		for _, b := range cuts {
			if a+b > len(buf) {
				continue
			}
			A, B := buf[:a], buf[a:a+b]
			want := crc32.Checksum(buf[:a+b], tab)
			got := Combine(crc32.Checksum(A, tab), crc32.Checksum(B, tab), int64(b))
			require.Equalf(t, want, got, "len(A)=%d len(B)=%d", a, b)
		}
	}
}

// TestCombineChunks folds a stream of unequal chunks the way a receiver
// does, and checks a corrupted chunk changes the result.
func TestCombineChunks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	buf := make([]byte, 3<<20+12345)
	for i := range buf {
		buf[i] = byte(r.Uint32())
	}
	var crc uint32
	for off := 0; off < len(buf); {
		n := min(1+r.IntN(256<<10), len(buf)-off)
		crc = Combine(crc, crc32.Checksum(buf[off:off+n], tab), int64(n))
		off += n
	}
	require.Equal(t, crc32.Checksum(buf, tab), crc)
	buf[len(buf)/2] ^= 1
	require.NotEqual(t, crc32.Checksum(buf, tab), crc)
}

// TestCombineHuge checks lengths past 2^32 bytes, which no buffer here
// can hold: the CRC of 2^k zero bytes is built by doubling, and folding
// it with itself must be associative whatever the grouping.
func TestCombineHuge(t *testing.T) {
	z := crc32.Checksum(make([]byte, 1<<12), tab)
	zeros := map[int64]uint32{1 << 12: z} // CRC of n zero bytes
	for n := int64(1 << 12); n < 1<<40; n *= 2 {
		zeros[2*n] = Combine(zeros[n], zeros[n], n)
	}
	a, b, c := int64(1)<<33, int64(1)<<39, int64(1)<<35
	left := Combine(Combine(zeros[a], zeros[b], b), zeros[c], c)
	right := Combine(zeros[a], Combine(zeros[b], zeros[c], c), b+c)
	require.Equal(t, left, right)
	// and against a different grouping of the same total length
	require.Equal(t, left, Combine(Combine(zeros[c], zeros[a], a), zeros[b], b))
	// the CRC of zero bytes depends on the length: these are not all equal
	require.NotEqual(t, zeros[1<<33], zeros[1<<34])
}

func BenchmarkCombine(b *testing.B) {
	for i := 0; i < b.N; i++ {
		_ = Combine(uint32(i), 0x12345678, 4<<20)
	}
}
