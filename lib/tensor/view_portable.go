//go:build !((386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm) && !purego)

package tensor

// ZeroCopy is true when [Bytes] and [Float32s] are zero-copy views of the
// same memory (little-endian hosts without the purego tag) and false when
// they return portable copies, as on this build.
const ZeroCopy = false

// Bytes returns the little-endian IEEE-754 bytes of f, 4·len(f) of them.
//
// On this build ([ZeroCopy] is false) it returns a fresh copy, encoded with
//
//	b := make([]byte, 4*len(f))
//	for i, v := range f {
//		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
//	}
//
// so writes to the result do not reach f. A nil f gives nil.
func Bytes(f []float32) []byte { return bytesPortable(f) }

// Float32s returns the float32 values whose little-endian IEEE-754 bytes
// are b; len(b) must be a multiple of 4 (it panics otherwise).
//
// On this build ([ZeroCopy] is false) it returns a fresh copy, decoded with
//
//	f := make([]float32, len(b)/4)
//	for i := range f {
//		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
//	}
//
// so there is no alignment requirement. A nil b gives nil.
func Float32s(b []byte) []float32 { return float32sPortable(b) }

// Alloc returns a zeroed []float32 of length n. On this build the views
// copy, so alignment does not matter and it is make([]float32, n).
func Alloc(n int) []float32 {
	if n < 0 {
		panic("tensor: Alloc: negative length")
	}
	return make([]float32, n)
}

// Uint32Bytes is [Bytes] for uint32s: the little-endian bytes of u, a fresh
// copy on this build. A nil u gives nil.
func Uint32Bytes(u []uint32) []byte {
	if u == nil {
		return nil
	}
	return AppendUint32s(make([]byte, 0, 4*len(u)), u)
}

// Uint32s is [Float32s] for uint32s: a fresh copy decoded from the
// little-endian bytes b on this build; len(b) must be a multiple of 4 (it
// panics otherwise). A nil b gives nil.
func Uint32s(b []byte) []uint32 { return uint32sPortable(b) }

// Aligned reports whether b may be viewed as 4-byte elements: on this
// build the views copy, so always.
func Aligned([]byte) bool { return true }
