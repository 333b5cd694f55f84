package codec

import (
	"math"

	"trainwire.dev/lib/tensor"
)

// Bit packing, pinned for every 1- and 2-bit codec: element i is bit
// 7 − (i mod 8) of byte i/8 (MSB first, as numpy's packbits with
// bitorder="big"), and the bits past the last element are zero. So
// x = [1, −1, 0, 2, −3, 4, −5, 6, 7] with bit = (x ≥ 0) packs to
// [0xB5, 0x80].

// packedLen returns the bytes of n packed bits.
func packedLen(n int64) int64 { return (n + 7) / 8 }

// packSignRef is packSignBits' plain twin: bit = 1 − signbit(x).
func packSignRef(dst []byte, x []float32) {
	clear(dst[:packedLen(int64(len(x)))])
	for i, v := range x {
		if !math.Signbit(float64(v)) {
			dst[i/8] |= 0x80 >> (i % 8)
		}
	}
}

// bitTable[b] holds the 8 bits of byte b, MSB first, as 0/1 float32s.
var bitTable = func() (t [256][8]float32) {
	for b := range 256 {
		for i := range 8 {
			if b&(0x80>>i) != 0 {
				t[b][i] = 1
			}
		}
	}
	return
}()

// unpackSelect writes one where the bit is set and zero where it is not.
func unpackSelect(dst []float32, bits []byte, one, zero float32) {
	n8 := len(dst) / 8
	var tab [256][8]float32
	// A table of the two values is cheaper to build (2048 stores) than to
	// branch per element, and beats arithmetic for every size above ~4K.
	if len(dst) >= 4096 {
		for b := range 256 {
			for i := range 8 {
				if bitTable[b][i] != 0 {
					tab[b][i] = one
				} else {
					tab[b][i] = zero
				}
			}
		}
		for j := 0; j < n8; j++ {
			*(*[8]float32)(dst[8*j : 8*j+8]) = tab[bits[j]]
		}
	} else {
		for j := 0; j < n8; j++ {
			b := bits[j]
			for i := range 8 {
				if b&(0x80>>i) != 0 {
					dst[8*j+i] = one
				} else {
					dst[8*j+i] = zero
				}
			}
		}
	}
	for i := 8 * n8; i < len(dst); i++ {
		if bits[i/8]&(0x80>>(i%8)) != 0 {
			dst[i] = one
		} else {
			dst[i] = zero
		}
	}
}

// checkPadding reports whether the bits past n in a packed vector are zero.
func checkPadding(bits []byte, n int64) bool {
	if r := n % 8; r != 0 {
		return bits[len(bits)-1]&byte(0xff>>r) == 0
	}
	return true
}

func f32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return tensor.Float32sOrCopy(b)
}

func f32bytes(x []float32) []byte {
	if x == nil {
		return []byte{}
	}
	return tensor.Bytes(x)
}
