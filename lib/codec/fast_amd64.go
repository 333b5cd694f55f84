//go:build amd64 && !purego

package codec

import "golang.org/x/sys/cpu"

// The amd64 kernels (fast_amd64.s) are taken when the CPU has them; the
// pure-Go kernels in fast.go are their twins, and the tests and
// FuzzKernelsAsm compare the two byte for byte. Build with -tags purego
// to leave the assembly out.
var (
	// haveAVX2 selects signSumsAVX2 and the qsgd kernels (sumSquares8AVX2
	// uses FMA).
	haveAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasBMI2 && cpu.X86.HasFMA
	// haveF16C selects f16AVX (VCVTPS2PH, round to nearest even).
	haveF16C = cpu.X86.HasAVX2 && cpu.X86.HasF16C
	// haveAVX512 selects the AVX-512 kernels (F, DQ, BW, VL; x/sys/cpu
	// reports them only where the OS saves the ZMM and mask registers).
	// A variable so that the tests can run the AVX2 kernels here too.
	haveAVX512 = haveAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL
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

// qsgdAVX512 is qsgdBlockGo on n elements (n a multiple of 32, sc24
// finite, maxT ≤ 127·2^24) and returns the wyrand state after its n/2
// draws; with stream (codes 64-byte aligned) it writes the codes with
// non-temporal stores of whole cache lines.
//
//go:noescape
func qsgdAVX512(codes *byte, x *float32, n int, sc24 float32, maxT uint32, seed uint64, stream bool) (state uint64)

// bf16AVX2 is bf16Fast on n floats (n a multiple of 16) for finite x;
// bad reports a NaN or ±Inf.
//
//go:noescape
func bf16AVX2(dst *byte, x *float32, n int) (bad bool)

// qsgdDecodeAVX2 sets dst[i] = u·float32(int8(codes[i])) for n elements
// (n a multiple of 32).
//
//go:noescape
func qsgdDecodeAVX2(dst *float32, codes *byte, n int, u float32)

// ternAVX512 is ternBitsGo on n elements (n a multiple of 16) from element
// i0 (a multiple of 8): planes at bits and bits[nb:], whole bytes stored;
// base = key + i0·rng.Golden.
//
//go:noescape
func ternAVX512(bits *byte, nb int, x *float32, n int, inv float64, base uint64)

// maxMagAVX2 is maxMagGo on n floats (n a multiple of 32).
//
//go:noescape
func maxMagAVX2(x *float32, n int) uint32

// naturalAVX512 is naturalCodesGo on n elements (n a multiple of 16) from
// element i0, base = key + i0·rng.Golden; bad reports a NaN or ±Inf.
//
//go:noescape
func naturalAVX512(codes *byte, x *float32, n int, base uint64) (bad bool)

// maxAbsI8AVX2 is maxAbsI8Go on n bytes (n a multiple of 32).
//
//go:noescape
func maxAbsI8AVX2(b *byte, n int) uint8

// f16DecodeAVX is f16DecodeGo on n halves (n a multiple of 32), with
// F16C's VCVTPH2PS (exact for every half; a signalling NaN comes out
// quiet, as F16ToF32 makes it).
//
//go:noescape
func f16DecodeAVX(dst *float32, src *byte, n int)

// countGE3AVX2 is countGEGo for three thresholds in one pass: out[j] is
// the number of the n floats (n a multiple of 32, n < 2^35) whose key is
// > tm1[j] as int32.
//
//go:noescape
func countGE3AVX2(x *float32, n int, tm1 *[3]int32, out *[3]int)

// geMaskAVX2 sets bit j of dst[w] where element 32w+j of the n floats
// (n a multiple of 32) has a magnitude key > tm1 (as int32).
//
//go:noescape
func geMaskAVX2(x *float32, n int, tm1 int32, dst *uint32)

// naturalDecodeAVX2 is naturalDecodeGo on n codes (n a multiple of 16).
//
//go:noescape
func naturalDecodeAVX2(dst *float32, src *byte, n int)

// bf16DecodeAVX2 is bf16DecodeGo on n halves (n a multiple of 16).
//
//go:noescape
func bf16DecodeAVX2(dst *float32, src *byte, n int)

// ternDecodeAVX2 is ternDecodeGo on n elements (n a multiple of 8) from
// a byte boundary.
//
//go:noescape
func ternDecodeAVX2(dst *float32, bits *byte, nb int, n int, s float32)

// ternDecodeAVX512 is ternDecodeGo on n elements (n a multiple of 16)
// starting at bits[0]'s first bit.
//
//go:noescape
func ternDecodeAVX512(dst *float32, bits *byte, nb int, n int, s float32)

// ternAVX2 is ternAVX512 on AVX2, n a multiple of 16.
//
//go:noescape
func ternAVX2(bits *byte, nb int, x *float32, n int, inv float64, base uint64)

// naturalAVX2 is naturalAVX512 on AVX2, n a multiple of 16.
//
//go:noescape
func naturalAVX2(codes *byte, x *float32, n int, base uint64) (bad bool)

// f16AVXNT is f16AVX with non-temporal stores: n a multiple of 32, dst
// 32-byte aligned.
//
//go:noescape
func f16AVXNT(dst *byte, x *float32, n int) (bad bool)

// bf16AVX2NT is bf16AVX2 with non-temporal stores, dst 32-byte aligned.
//
//go:noescape
func bf16AVX2NT(dst *byte, x *float32, n int) (bad bool)

// signumAVX2 is signumGo on n elements (n a multiple of 32).
//
//go:noescape
func signumAVX2(dst *byte, m *float32, x *float32, n int, b, a float32)

// countGE7AVX2 is countGE3AVX2 for seven thresholds, n a multiple of 8
// (n < 2^35).
//
//go:noescape
func countGE7AVX2(x *float32, n int, tm1 *[7]int32, out *[7]int)

// outer4AVX2 is outer4Go on n rows (n a multiple of 8), p the four
// coefficients.
//
//go:noescape
func outer4AVX2(row *float32, q *float32, n int, p *[4]float32)

// axpy4AVX2 is axpy4Go on the n elements of row.
//
//go:noescape
func axpy4AVX2(q *float64, row *float32, n int, p *[4]float64)

// dot4x4AVX2 is dot4Go on the four rows of m floats from x.
//
//go:noescape
func dot4x4AVX2(x *float32, m int, q *float32, out *[16]float64)
