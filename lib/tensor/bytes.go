package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
)

// EncodeLE writes the little-endian IEEE-754 bytes of src into dst, which
// must hold at least 4·len(src) bytes; it returns the number of bytes
// written. It is portable (no unsafe) and is what [Bytes] does on builds
// where [ZeroCopy] is false. Equivalent to:
//
//	for i, v := range src {
//		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
//	}
func EncodeLE(dst []byte, src []float32) int {
	n := 4 * len(src)
	if len(dst) < n {
		panic(fmt.Sprintf("tensor: EncodeLE: dst holds %d bytes, need %d", len(dst), n))
	}
	dst = dst[:n]
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
	return n
}

// DecodeLE reads little-endian IEEE-754 float32 values from src into dst,
// which must hold at least len(src)/4 elements; len(src) must be a multiple
// of 4. It returns the number of elements written. It is portable and is
// what [Float32s] does on builds where [ZeroCopy] is false. Equivalent to:
//
//	for i := range dst {
//		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
//	}
func DecodeLE(dst []float32, src []byte) int {
	if len(src)%4 != 0 {
		panic(fmt.Sprintf("tensor: DecodeLE: %d bytes is not a whole number of float32", len(src)))
	}
	n := len(src) / 4
	if len(dst) < n {
		panic(fmt.Sprintf("tensor: DecodeLE: dst holds %d elements, need %d", len(dst), n))
	}
	dst = dst[:n]
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
	return n
}

// bytesPortable is the portable twin of the zero-copy [Bytes]: a fresh
// slice holding the little-endian bytes of f.
func bytesPortable(f []float32) []byte {
	if f == nil {
		return nil
	}
	b := make([]byte, 4*len(f))
	EncodeLE(b, f)
	return b
}

// float32sPortable is the portable twin of the zero-copy [Float32s]: a
// fresh slice decoded from the little-endian bytes b.
func float32sPortable(b []byte) []float32 {
	if b == nil {
		return nil
	}
	if len(b)%4 != 0 {
		panic(fmt.Sprintf("tensor: Float32s: %d bytes is not a whole number of float32", len(b)))
	}
	f := make([]float32, len(b)/4)
	DecodeLE(f, b)
	return f
}
