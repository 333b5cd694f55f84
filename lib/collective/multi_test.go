package collective_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"trainwire.dev/lib/collective"
)

// AllReduceBytesMulti on several buffers gives every buffer the bits
// AllReduceBytes gives it alone (a non-associative ⊕, so the order along
// the ring shows), on every rank, for any lengths (empty ones too), world
// and segment size, and sends the sum of the buffers' bytes.
func TestAllReduceBytesMultiEqualsOneByOne(t *testing.T) {
	red := func(dst, src []byte) {
		for i := 0; i+2 <= len(dst); i += 2 {
			a, b := binary.LittleEndian.Uint16(dst[i:]), binary.LittleEndian.Uint16(src[i:])
			hi := min(uint16(a>>8)+uint16(b>>8)/2+1, 255)
			binary.LittleEndian.PutUint16(dst[i:], hi<<8|(a^b)&0xff)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(rt, "n")
		nb := rapid.IntRange(0, 5).Draw(rt, "buffers")
		seg := rapid.SampledFrom([]int{4, 6, 64, 1 << 20}).Draw(rt, "segment")
		lens := make([]int, nb)
		for i := range lens {
			lens[i] = rapid.IntRange(0, 200).Draw(rt, "L")
		}
		ms := worldOf(t, n)
		in := make([][][]byte, n)
		for r := range n {
			in[r] = make([][]byte, nb)
			for i, L := range lens {
				in[r][i] = make([]byte, 2*L)
				for j := range in[r][i] {
					in[r][i][j] = byte(rapid.IntRange(0, 255).Draw(rt, "b"))
				}
			}
		}
		clone := func(bs [][]byte) [][]byte {
			out := make([][]byte, len(bs))
			for i, b := range bs {
				out[i] = append([]byte(nil), b...)
			}
			return out
		}
		one := make([][][]byte, n)
		errs := onAll(ms, collective.Options{Segment: seg}, func(r int, c *collective.Comm) error {
			one[r] = clone(in[r])
			for _, b := range one[r] {
				if err := c.AllReduceBytes(context.Background(), b, 2, red); err != nil {
					return err
				}
			}
			return nil
		})
		for r := range n {
			require.NoError(t, errs[r])
		}
		sent := func(r int) int64 {
			var s int64
			for _, pt := range ms[r].Counters() {
				s += pt.Total().BytesSent
			}
			return s
		}
		before := make([]int64, n)
		for r := range n {
			before[r] = sent(r)
		}
		multi := make([][][]byte, n)
		errs = onAll(ms, collective.Options{Segment: seg}, func(r int, c *collective.Comm) error {
			multi[r] = clone(in[r])
			return c.AllReduceBytesMulti(context.Background(), multi[r], 2, red)
		})
		for r := range n {
			require.NoError(t, errs[r])
			for i := range lens {
				require.True(t, bytes.Equal(one[0][i], multi[r][i]), "rank %d buffer %d: %x, want %x", r, i, multi[r][i], one[0][i])
			}
			var want int64
			for _, L := range lens {
				if n == 1 {
					break
				}
				lo, hi := collective.Chunk(L, n, r)
				lo2, hi2 := collective.Chunk(L, n, (r+1)%n)
				want += int64(2 * (2*L - (hi - lo) - (hi2 - lo2)))
			}
			require.Equal(t, want, sent(r)-before[r], "rank %d: bytes sent", r)
		}
	})
}

func TestAllReduceBytesMultiBadLength(t *testing.T) {
	ms := worldOf(t, 2)
	errs := onAll(ms, collective.Options{}, func(r int, c *collective.Comm) error {
		return c.AllReduceBytesMulti(context.Background(), [][]byte{make([]byte, 4), make([]byte, 3)}, 2, func(dst, src []byte) {})
	})
	for _, err := range errs {
		require.ErrorContains(t, err, "buffer 1")
	}
}
