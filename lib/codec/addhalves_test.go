package codec

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAddHalves: the fused ring ⊕ equals the scalar definition (decode
// both halves, add in float32, round back with the scalar cast) bit for
// bit (NaN payloads aside), for fp16 and bf16, on lengths around the block and vector widths,
// with ordinary values, sums that overflow fp16 to ±Inf, ±Inf, NaN, ±0
// and subnormals.
func TestAddHalves(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, bf := range []bool{false, true} {
		to, from := F32ToF16, F16ToF32
		if bf {
			to, from = F32ToBF16, BF16ToF32
		}
		for _, n := range []int{0, 1, 7, 31, 33, 2047, 2049, 70001} {
			dst, src := make([]byte, 2*n), make([]byte, 2*n)
			for i := range n {
				for _, b := range [][]byte{dst, src} {
					var h uint16
					switch rng.IntN(12) {
					case 0:
						h = uint16(rng.Uint32()) // any bits: NaN, Inf, subnormal
					case 1:
						h = to(float32(rng.NormFloat64() * 40000)) // sums past 65504
					default:
						h = to(float32(rng.NormFloat64()))
					}
					binary.LittleEndian.PutUint16(b[2*i:], h)
				}
			}
			want := make([]byte, 2*n)
			for i := range n {
				s := from(binary.LittleEndian.Uint16(dst[2*i:])) + from(binary.LittleEndian.Uint16(src[2*i:]))
				binary.LittleEndian.PutUint16(want[2*i:], to(s))
			}
			AddHalves(dst, src, bf)
			for i := range n {
				g, w := binary.LittleEndian.Uint16(dst[2*i:]), binary.LittleEndian.Uint16(want[2*i:])
				// A NaN's payload is the one thing left open (which operand's
				// NaN an addition keeps is up to the compiler); NaN-ness is not.
				if g != w && !(isNaNHalf(g, from) && isNaNHalf(w, from)) {
					require.Failf(t, "AddHalves", "bf16=%v n=%d element %d: %#04x, want %#04x", bf, n, i, g, w)
				}
			}
		}
	}
}

func isNaNHalf(h uint16, from func(uint16) float32) bool {
	v := from(h)
	return v != v
}
