package tensor

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// This file holds the view-or-copy helpers built on [Float32s], [Uint32s],
// [Bytes] and [Uint32Bytes]: what a caller reading or writing tensors in
// byte buffers of unknown alignment (wire frames, network messages) uses
// instead of its own unsafe casts. Each behaves the same on every build;
// only whether memory is shared differs, as [ZeroCopy] says.

// Float32sOrCopy returns b's little-endian float32s: a view of b when the
// build and b's alignment allow one ([ZeroCopy] and [Aligned]), else a
// decoded copy. Writes to the result reach b only in the first case, so
// callers treat it as read-only. len(b) must be a multiple of 4.
func Float32sOrCopy(b []byte) []float32 {
	if ZeroCopy && Aligned(b) {
		return Float32s(b)
	}
	return float32sPortable(b)
}

// Uint32sOrCopy is [Float32sOrCopy] for uint32s.
func Uint32sOrCopy(b []byte) []uint32 {
	if ZeroCopy && Aligned(b) {
		return Uint32s(b)
	}
	return uint32sPortable(b)
}

// WritableFloat32s returns float32s to write into and a flush that makes b
// hold them (little-endian): a view of b when the build and b's alignment
// allow one (flush then does nothing), else a scratch slice that flush
// encodes into b. len(b) must be a multiple of 4.
func WritableFloat32s(b []byte) (f []float32, flush func()) {
	if ZeroCopy && Aligned(b) {
		return Float32s(b), func() {}
	}
	f = make([]float32, len(b)/4)
	return f, func() { EncodeLE(b, f) }
}

// WritableUint32s is [WritableFloat32s] for uint32s.
func WritableUint32s(b []byte) (u []uint32, flush func()) {
	if ZeroCopy && Aligned(b) {
		return Uint32s(b), func() {}
	}
	u = make([]uint32, len(b)/4)
	return u, func() { encodeUint32sLE(b, u) }
}

// AppendFloat32s appends the little-endian bytes of v to dst.
func AppendFloat32s(dst []byte, v []float32) []byte {
	if ZeroCopy {
		return append(dst, Bytes(v)...)
	}
	n := len(dst)
	dst = slices.Grow(dst, 4*len(v))[:n+4*len(v)]
	EncodeLE(dst[n:], v)
	return dst
}

// AppendUint32s appends the little-endian bytes of v to dst.
func AppendUint32s(dst []byte, v []uint32) []byte {
	if ZeroCopy {
		return append(dst, Uint32Bytes(v)...)
	}
	for _, x := range v {
		dst = binary.LittleEndian.AppendUint32(dst, x)
	}
	return dst
}

// encodeUint32sLE writes the little-endian bytes of src into dst.
func encodeUint32sLE(dst []byte, src []uint32) {
	for i, x := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], x)
	}
}

// uint32sPortable is the portable twin of the zero-copy [Uint32s]: a fresh
// slice decoded from the little-endian bytes b.
func uint32sPortable(b []byte) []uint32 {
	if b == nil {
		return nil
	}
	if len(b)%4 != 0 {
		panic(fmt.Sprintf("tensor: Uint32s: %d bytes is not a whole number of uint32", len(b)))
	}
	u := make([]uint32, len(b)/4)
	for i := range u {
		u[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return u
}
