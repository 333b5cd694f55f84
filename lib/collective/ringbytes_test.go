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

// u16 "sum" that is not associative (a saturating add of the high bytes
// and an xor of the low ones), so the ring's order shows: AllReduceBytes
// equals the RingOrder reference on every rank, for any length and world,
// with the elem-sized volumes of the ring.
func TestAllReduceBytesRingOrder(t *testing.T) {
	red := func(dst, src []byte) {
		for i := 0; i+2 <= len(dst); i += 2 {
			a, b := binary.LittleEndian.Uint16(dst[i:]), binary.LittleEndian.Uint16(src[i:])
			hi := min(uint16(a>>8)+uint16(b>>8)/2+1, 255)
			binary.LittleEndian.PutUint16(dst[i:], hi<<8|(a^b)&0xff)
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 6).Draw(rt, "n")
		L := rapid.IntRange(0, 600).Draw(rt, "L")
		seg := rapid.SampledFrom([]int{4, 6, 64, 1 << 20}).Draw(rt, "segment")
		ms := worldOf(t, n)
		in := make([][]byte, n)
		for r := range n {
			in[r] = make([]byte, 2*L)
			for i := range in[r] {
				in[r][i] = byte(rapid.IntRange(0, 255).Draw(rt, "b"))
			}
		}
		want := make([]byte, 2*L)
		for k := range n {
			lo, hi := collective.Chunk(L, n, k)
			o := collective.RingOrder(n, k)
			for i := lo; i < hi; i++ {
				s := append([]byte(nil), in[o[0]][2*i:2*i+2]...)
				for _, j := range o[1:] {
					x := append([]byte(nil), in[j][2*i:2*i+2]...)
					red(x, s)
					s = x
				}
				copy(want[2*i:], s)
			}
		}
		out := make([][]byte, n)
		before := make([]map[string]int64, n)
		for r := range n {
			before[r] = map[string]int64{}
			for ph, pt := range ms[r].Counters() {
				before[r][ph] = pt.Total().BytesSent
			}
		}
		errs := onAll(ms, collective.Options{Segment: seg}, func(r int, c *collective.Comm) error {
			out[r] = append([]byte(nil), in[r]...)
			return c.AllReduceBytes(context.Background(), out[r], 2, red)
		})
		for r := range n {
			require.NoError(t, errs[r])
			require.True(t, bytes.Equal(want, out[r]), "rank %d: %x, want %x", r, out[r], want)
			if n == 1 {
				continue
			}
			lo, hi := collective.Chunk(L, n, r)
			lo2, hi2 := collective.Chunk(L, n, (r+1)%n)
			c := ms[r].Counters()
			require.Equal(t, int64(2*(L-(hi-lo))), c["reduce-scatter"].Total().BytesSent-before[r]["reduce-scatter"])
			require.Equal(t, int64(2*(L-(hi2-lo2))), c["allgather"].Total().BytesSent-before[r]["allgather"])
		}
	})
}

func TestAllReduceBytesBadLength(t *testing.T) {
	ms := worldOf(t, 1)
	c := collective.New(ms[0], collective.Options{})
	require.Error(t, c.AllReduceBytes(context.Background(), make([]byte, 3), 2, nil))
	_, _, err := c.ReduceScatterBytes(context.Background(), make([]byte, 3), 2, nil)
	require.Error(t, err)
}
