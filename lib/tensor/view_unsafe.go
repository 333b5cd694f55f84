//go:build (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm) && !purego

package tensor

import (
	"fmt"
	"unsafe"
)

// ZeroCopy is true when [Bytes] and [Float32s] are zero-copy views of the
// same memory (little-endian hosts without the purego tag) and false when
// they return portable copies.
const ZeroCopy = true

// Bytes returns the little-endian IEEE-754 bytes of f, 4·len(f) of them.
//
// On this build ([ZeroCopy] is true) the result is a view of f's memory,
// not a copy: writes through either slice are seen by the other, and the
// result must not outlive the caller's use of f. It is equivalent to the
// portable
//
//	b := make([]byte, 4*len(f))
//	for i, v := range f {
//		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
//	}
//
// without the allocation and the copy (which is what the big-endian and
// purego builds do). A nil f gives nil; an empty one an empty slice.
func Bytes(f []float32) []byte {
	if f == nil {
		return nil
	}
	if len(f) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

// Float32s returns the float32 values whose little-endian IEEE-754 bytes
// are b; len(b) must be a multiple of 4.
//
// On this build ([ZeroCopy] is true) the result is a view of b's memory, so
// b's first byte must be 4-byte aligned: slices from [Alloc], [Bytes], make
// of a []float32, or any []byte whose offset into an aligned buffer is a
// multiple of 4. Float32s panics on a misaligned b or a length that is not
// a multiple of 4 (both are programming errors, never data errors: callers
// check lengths that come from the network before calling). It is
// equivalent to the portable
//
//	f := make([]float32, len(b)/4)
//	for i := range f {
//		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
//	}
//
// without the allocation and the copy. A nil b gives nil.
func Float32s(b []byte) []float32 {
	if b == nil {
		return nil
	}
	if len(b)%4 != 0 {
		panic(fmt.Sprintf("tensor: Float32s: %d bytes is not a whole number of float32", len(b)))
	}
	if len(b) == 0 {
		return []float32{}
	}
	p := unsafe.Pointer(unsafe.SliceData(b))
	if uintptr(p)%4 != 0 {
		panic(fmt.Sprintf("tensor: Float32s: buffer at %p is not 4-byte aligned (allocate with tensor.Alloc)", p))
	}
	return unsafe.Slice((*float32)(p), len(b)/4)
}

// Alloc returns a zeroed []float32 of length n whose memory (and so its
// [Bytes] view) starts on an 8-byte boundary. It allocates a []uint64 and
// reinterprets it, which the Go allocator aligns to 8 bytes; equivalent to
// make([]float32, n) with the alignment guaranteed rather than incidental.
// On Linux, buffers of 4 MiB and more are advised to use transparent huge
// pages (madvise MADV_HUGEPAGE), which makes copying them through sockets
// and summing them faster.
func Alloc(n int) []float32 {
	if n < 0 {
		panic("tensor: Alloc: negative length")
	}
	if n == 0 {
		return []float32{}
	}
	words := make([]uint64, (n+1)/2)
	p := unsafe.Pointer(unsafe.SliceData(words))
	adviseHuge(p, 4*n)
	return unsafe.Slice((*float32)(p), n)
}

// Uint32Bytes is [Bytes] for uint32s: the little-endian bytes of u, a view
// of u's memory on this build. A nil u gives nil; an empty one an empty
// slice.
func Uint32Bytes(u []uint32) []byte {
	if u == nil {
		return nil
	}
	if len(u) == 0 {
		return []byte{}
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(u))), 4*len(u))
}

// Uint32s is [Float32s] for uint32s: a view of b's memory on this build,
// with the same alignment and length rules (it panics when they are
// broken). A nil b gives nil.
func Uint32s(b []byte) []uint32 {
	f := Float32s(b)
	if f == nil {
		return nil
	}
	if len(f) == 0 {
		return []uint32{}
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(f))), len(f))
}

// Aligned reports whether b may be viewed as 4-byte elements: on this
// build, whether its first byte sits on a 4-byte boundary. [Float32s] and
// [Uint32s] panic on a b for which it is false.
func Aligned(b []byte) bool {
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))%4 == 0
}
