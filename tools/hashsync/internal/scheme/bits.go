package scheme

import (
	"math"
	"unsafe"

	"trainwire.dev/lib/tensor"
)

func f32bits(f float32) uint32 { return math.Float32bits(f) }

// f32view returns b as float32s: a view when the memory allows one, else
// a decoded copy.
func f32view(b []byte) []float32 {
	if tensor.ZeroCopy && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 == 0 {
		return tensor.Float32s(b)
	}
	f := make([]float32, len(b)/4)
	tensor.DecodeLE(f, b)
	return f
}

// u32view returns b as uint32s (little-endian), a view when possible.
func u32view(b []byte) []uint32 {
	f := f32view(b)
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
}

// appendF32s appends the little-endian bytes of v.
func appendF32s(dst []byte, v []float32) []byte {
	if tensor.ZeroCopy {
		return append(dst, tensor.Bytes(v)...)
	}
	return putF32s(dst, v)
}

// appendU32s appends the little-endian bytes of v.
func appendU32s(dst []byte, v []uint32) []byte {
	if tensor.ZeroCopy && len(v) > 0 {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))...)
	}
	return putU32s(dst, v)
}

// f32out returns b as float32s to write into, and a flush that makes b
// hold them (little-endian): b itself when the memory allows a view (flush
// does nothing), else a scratch slice that flush encodes into b.
func f32out(b []byte) ([]float32, func()) {
	if tensor.ZeroCopy && uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 == 0 {
		return tensor.Float32s(b), func() {}
	}
	f := make([]float32, len(b)/4)
	return f, func() { tensor.EncodeLE(b, f) }
}

// u32out is f32out for uint32s.
func u32out(b []byte) ([]uint32, func()) {
	f, flush := f32out(b)
	if len(f) == 0 {
		return nil, flush
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(f))), len(f)), flush
}
