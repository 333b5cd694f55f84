package codec

import (
	"math"
)

// Fused kernels: each makes one pass over x and also reports whether x
// holds a NaN or ±Inf (an exponent field of all ones), so the encoders
// need no separate validation pass. Each has a plain twin in the tests.

// blockLen is the fixed block of the parallel reductions: partial sums
// are per block and added in block order, so results never depend on
// the number of goroutines.
const blockLen = 64 << 10

// expBad accumulates the NaN/Inf test: bit 31 of the result is set iff
// some u had an all-ones exponent.
func expBad(u uint32) uint32 { return (u & 0x7f800000) + 0x00800000 }

// packSignBits packs bit = 1 − signbit(x) (so +0 → 1 and −0 → 0) of x
// into dst, MSB first; it returns false if x holds a non-finite value.
func packSignBits(dst []byte, x []float32) bool {
	n8 := len(x) / 8
	var bad uint32
	for j := 0; j < n8; j++ {
		v := (*[8]float32)(x[8*j:])
		u0, u1, u2, u3 := math.Float32bits(v[0]), math.Float32bits(v[1]), math.Float32bits(v[2]), math.Float32bits(v[3])
		u4, u5, u6, u7 := math.Float32bits(v[4]), math.Float32bits(v[5]), math.Float32bits(v[6]), math.Float32bits(v[7])
		bad |= expBad(u0) | expBad(u1) | expBad(u2) | expBad(u3) | expBad(u4) | expBad(u5) | expBad(u6) | expBad(u7)
		b := u0>>31<<7 | u1>>31<<6 | u2>>31<<5 | u3>>31<<4 | u4>>31<<3 | u5>>31<<2 | u6>>31<<1 | u7>>31
		dst[j] = ^byte(b)
	}
	if r := len(x) % 8; r != 0 {
		var b byte
		for i, v := range x[8*n8:] {
			u := math.Float32bits(v)
			bad |= expBad(u)
			if u>>31 == 0 {
				b |= 0x80 >> i
			}
		}
		dst[n8] = b
	}
	return bad&0x80000000 == 0
}

// f16Fast converts x to IEEE half bits in dst (2 bytes each, little
// endian), with a branch-light path for results in the normal half range;
// it returns false if x holds a non-finite value.
func f16Fast(dst []byte, x []float32) bool {
	var bad uint32
	_ = dst[2*len(x)-1]
	for i, v := range x {
		u := math.Float32bits(v)
		bad |= expBad(u)
		mag := u & 0x7fffffff
		var h uint32
		if mag-0x38800000 < 0x477fe000-0x38800000 {
			h = (mag+0xfff+(mag>>13)&1)>>13 - 0x1c000
			h |= u >> 16 & 0x8000
		} else {
			h = uint32(F32ToF16(v))
		}
		dst[2*i] = byte(h)
		dst[2*i+1] = byte(h >> 8)
	}
	return bad&0x80000000 == 0
}

// bf16Fast converts x to bfloat16 bits in dst; false if x holds a
// non-finite value (which it still converts).
func bf16Fast(dst []byte, x []float32) bool {
	var bad uint32
	_ = dst[2*len(x)-1]
	for i, v := range x {
		u := math.Float32bits(v)
		bad |= expBad(u)
		h := (u + 0x7fff + (u>>16)&1) >> 16
		dst[2*i] = byte(h)
		dst[2*i+1] = byte(h >> 8)
	}
	if bad&0x80000000 != 0 {
		for i, v := range x {
			h := F32ToBF16(v)
			dst[2*i] = byte(h)
			dst[2*i+1] = byte(h >> 8)
		}
		return false
	}
	return true
}

// blockReduce runs f on every fixed block of x in parallel and returns
// the per-block results in block order.
func blockReduce(x []float32, nworkers int, f func(b []float32) float64) []float64 {
	nb := (len(x) + blockLen - 1) / blockLen
	out := make([]float64, nb)
	cs := chunks(nb, max(1, min(workersFor(nworkers), nb)), 1)
	parallel(cs, func(_ int, lo, hi int) {
		for b := lo; b < hi; b++ {
			out[b] = f(x[b*blockLen : min((b+1)*blockLen, len(x))])
		}
	})
	return out
}

func sumInOrder(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}
