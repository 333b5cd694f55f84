package codec

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"trainwire.dev/lib/wire"
)

// TestSumHalvesExact: the vectorised fp16/bf16 sum gives the bytes of the
// scalar definition (decode each half, add the frames in order in
// float32, ÷ n when averaging, round once) for any halves — sums that
// overflow to ±Inf, Inf and NaN inputs, subnormals — at lengths around
// the block and chunk boundaries. Which NaN a sum of two NaNs carries is
// not specified (Go leaves the operand order of a float add to the
// compiler), so a NaN matches any NaN.
func TestSumHalvesExact(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, algo := range []string{"fp16", "bf16"} {
		c := mustNew(t, algo, Options{})
		h := c.(*half)
		for _, d := range []int{1, 31, 2047, 2048, 2049, 70001} {
			for _, nf := range []int{1, 3} {
				fs := make([]*wire.Compressed, nf)
				for k := range fs {
					b := make([]byte, 2*d)
					for i := 0; i < d; i++ {
						var v uint16
						switch r.IntN(20) {
						case 0:
							v = uint16(r.Uint32()) // anything: NaN, Inf, subnormal
						case 1:
							v = h.to(65000) // fp16: three of these overflow
						default:
							v = h.to(float32(r.NormFloat64()))
						}
						binary.LittleEndian.PutUint16(b[2*i:], v)
					}
					fs[k] = &wire.Compressed{Name: "w", Algo: algo, DType: wire.F32, Shape: []int64{int64(d)},
						Parts: []wire.Part{part("data", h.dt, b, int64(d))}}
				}
				for _, average := range []bool{false, true} {
					want := make([]byte, 2*d)
					for i := 0; i < d; i++ {
						var a float32
						for _, f := range fs {
							a += h.from(binary.LittleEndian.Uint16(f.Parts[0].Data[2*i:]))
						}
						if average {
							a /= float32(nf)
						}
						binary.LittleEndian.PutUint16(want[2*i:], h.to(a))
					}
					if got := sumHalves(h, fs, average); !bytes.Equal(got, want) {
						for i := 0; i < d; i++ {
							g, w := binary.LittleEndian.Uint16(got[2*i:]), binary.LittleEndian.Uint16(want[2*i:])
							if g != w && !(nanHalf(h.dt, g) && nanHalf(h.dt, w)) {
								t.Fatalf("%s d=%d frames=%d average=%v: element %d is %#04x, scalar %#04x", algo, d, nf, average, i,
									binary.LittleEndian.Uint16(got[2*i:]), binary.LittleEndian.Uint16(want[2*i:]))
							}
						}
					}
				}
			}
		}
	}
}

// nanHalf reports whether v is a NaN of the half type dt.
func nanHalf(dt wire.DType, v uint16) bool {
	if dt == wire.BF16 {
		return v&0x7f80 == 0x7f80 && v&0x7f != 0
	}
	return v&0x7c00 == 0x7c00 && v&0x3ff != 0
}
