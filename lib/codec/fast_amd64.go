//go:build amd64 && !purego

package codec

import "golang.org/x/sys/cpu"

// The amd64 kernels (fast_amd64.s) are taken when the CPU has them; the
// pure-Go kernels in fast.go are their twins, and the tests and
// FuzzKernelsAsm compare the two byte for byte. Build with -tags purego
// to leave the assembly out.
var (
	// haveAVX2 selects signSumsAVX2 and the qsgd kernels.
	haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasBMI2
	// haveF16C selects f16AVX (VCVTPS2PH, round to nearest even).
	haveF16C = cpu.X86.HasAVX2 && cpu.X86.HasF16C
)

// f16AVX converts n floats (n a multiple of 8) to IEEE halves in dst
// (2n bytes) with VCVTPS2PH; bad reports a NaN or ±Inf in x.
//
//go:noescape
func f16AVX(dst *byte, x *float32, n int) (bad bool)

// signSumsAVX2 is signSumsGo on n floats (n a multiple of 32): packs
// 1 − signbit into dst (n/8 bytes) and returns Σx and Σ|x| added in
// signSumsGo's order (float32 tree of 8, then float64 in sequence).
//
//go:noescape
func signSumsAVX2(dst *byte, x *float32, n int) (bad bool, sum, sumAbs float64)

// sumSquares8AVX2 sets out[b] = sumSquaresGo(x[b*n:(b+1)*n]) for eight
// consecutive blocks of n floats (n a multiple of 4).
//
//go:noescape
func sumSquares8AVX2(x *float32, n int, out *[8]float64)

// qsgdAVX2 is qsgdBlockGo on n elements (n a multiple of 16, sc24 finite)
// and returns the wyrand state after its n/2 draws.
//
//go:noescape
func qsgdAVX2(codes *byte, x *float32, n int, sc24 float32, maxT uint32, seed uint64) (state uint64)

// signBitsAVX2 is packSignBits on n floats (n a multiple of 32); bad
// reports a NaN or ±Inf.
//
//go:noescape
func signBitsAVX2(dst *byte, x *float32, n int) (bad bool)
