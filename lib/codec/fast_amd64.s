//go:build amd64 && !purego

#include "textflag.h"

// Lane order reversal for VPERMD: the packed bytes are MSB first.
DATA revidx<>+0(SB)/4, $7
DATA revidx<>+4(SB)/4, $6
DATA revidx<>+8(SB)/4, $5
DATA revidx<>+12(SB)/4, $4
DATA revidx<>+16(SB)/4, $3
DATA revidx<>+20(SB)/4, $2
DATA revidx<>+24(SB)/4, $1
DATA revidx<>+28(SB)/4, $0
GLOBL revidx<>(SB), RODATA|NOPTR, $32

// func f16AVX(dst *byte, x *float32, n int) (bad bool)
TEXT ·f16AVX(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x7f800000, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8
	VPXOR Y9, Y9, Y9

f16loop32:
	CMPQ CX, $32
	JB   f16loop8
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VCVTPS2PH $0, Y0, X4
	VCVTPS2PH $0, Y1, X5
	VCVTPS2PH $0, Y2, X6
	VCVTPS2PH $0, Y3, X7
	VMOVDQU X4, 0(DI)
	VMOVDQU X5, 16(DI)
	VMOVDQU X6, 32(DI)
	VMOVDQU X7, 48(DI)
	VPAND   Y8, Y0, Y0
	VPAND   Y8, Y1, Y1
	VPAND   Y8, Y2, Y2
	VPAND   Y8, Y3, Y3
	VPMAXUD Y0, Y9, Y9
	VPMAXUD Y1, Y9, Y9
	VPMAXUD Y2, Y9, Y9
	VPMAXUD Y3, Y9, Y9
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $32, CX
	JMP  f16loop32

f16loop8:
	CMPQ CX, $8
	JB   f16done
	VMOVDQU 0(SI), Y0
	VCVTPS2PH $0, Y0, X4
	VMOVDQU X4, 0(DI)
	VPAND   Y8, Y0, Y0
	VPMAXUD Y0, Y9, Y9
	ADDQ $32, SI
	ADDQ $16, DI
	SUBQ $8, CX
	JMP  f16loop8

f16done:
	VPCMPEQD Y8, Y9, Y9
	VPTEST   Y9, Y9
	SETNE    bad+24(FP)
	VZEROUPPER
	RET

// func signSumsAVX2(dst *byte, x *float32, n int) (bad bool, sum, sumAbs float64)
TEXT ·signSumsAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	MOVL $0x7f800000, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8
	MOVL $0x7fffffff, AX
	MOVD AX, X10
	VPBROADCASTD X10, Y10
	VMOVDQU revidx<>(SB), Y11
	VPXOR   Y9, Y9, Y9
	VXORPD  X12, X12, X12

sgloop:
	TESTQ CX, CX
	JZ    sgdone
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3

	// NaN/Inf: the largest exponent field seen.
	VPAND   Y8, Y0, Y4
	VPMAXUD Y4, Y9, Y9
	VPAND   Y8, Y1, Y4
	VPMAXUD Y4, Y9, Y9
	VPAND   Y8, Y2, Y4
	VPMAXUD Y4, Y9, Y9
	VPAND   Y8, Y3, Y4
	VPMAXUD Y4, Y9, Y9

	// Sign bits, element 0 in the MSB, inverted.
	VPERMD    Y0, Y11, Y4
	VMOVMSKPS Y4, AX
	VPERMD    Y1, Y11, Y4
	VMOVMSKPS Y4, BX
	VPERMD    Y2, Y11, Y4
	VMOVMSKPS Y4, DX
	VPERMD    Y3, Y11, Y4
	VMOVMSKPS Y4, R8
	SHLL $8, BX
	SHLL $16, DX
	SHLL $24, R8
	ORL  BX, AX
	ORL  DX, R8
	ORL  R8, AX
	NOTL AX
	MOVL AX, 0(DI)

	// Σx: ((v0+v1)+(v2+v3))+((v4+v5)+(v6+v7)) per group of 8.
	VHADDPS      Y1, Y0, Y4
	VHADDPS      Y3, Y2, Y5
	VHADDPS      Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS       X5, X4, X4

	// Σ|x| the same way.
	VANDPS       Y10, Y0, Y0
	VANDPS       Y10, Y1, Y1
	VANDPS       Y10, Y2, Y2
	VANDPS       Y10, Y3, Y3
	VHADDPS      Y1, Y0, Y6
	VHADDPS      Y3, Y2, Y7
	VHADDPS      Y7, Y6, Y6
	VEXTRACTF128 $1, Y6, X7
	VADDPS       X7, X6, X6

	// [sum, sumAbs] += group 0, 1, 2, 3 in turn, in float64.
	VCVTPS2PD    X4, Y4
	VCVTPS2PD    X6, Y6
	VUNPCKLPD    Y6, Y4, Y5
	VUNPCKHPD    Y6, Y4, Y7
	VADDPD       X5, X12, X12
	VADDPD       X7, X12, X12
	VEXTRACTF128 $1, Y5, X5
	VEXTRACTF128 $1, Y7, X7
	VADDPD       X5, X12, X12
	VADDPD       X7, X12, X12

	ADDQ $128, SI
	ADDQ $4, DI
	DECQ CX
	JMP  sgloop

sgdone:
	VPCMPEQD Y8, Y9, Y9
	VPTEST   Y9, Y9
	SETNE    bad+24(FP)
	MOVSD    X12, sum+32(FP)
	VPERMILPD $1, X12, X13
	MOVSD    X13, sumAbs+40(FP)
	VZEROUPPER
	RET

// func sumSquares8AVX2(x *float32, n int, out *[8]float64)
// out[b] = sumSquaresGo(x[b*n : (b+1)*n]) for b = 0..7, n a multiple of
// 4: the even and odd chains of the eight blocks run side by side, two
// blocks to a vector.
TEXT ·sumSquares8AVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ out+16(FP), DI
	MOVQ CX, DX
	SHLQ $2, DX          // block stride in bytes
	LEAQ (SI)(DX*4), R8  // block 4
	VXORPD Y12, Y12, Y12 // [a0 b0 a1 b1]
	VXORPD Y13, Y13, Y13 // [a2 b2 a3 b3]
	VXORPD Y14, Y14, Y14 // [a4 b4 a5 b5]
	VXORPD Y15, Y15, Y15 // [a6 b6 a7 b7]
	SHRQ $2, CX
	LEAQ (DX)(DX*2), R9  // 3 strides

ssloop:
	TESTQ CX, CX
	JZ    ssdone
	// x² is exact in float64, so acc + x² rounds once either way: FMA.
	PREFETCHT0 512(SI)
	PREFETCHT0 512(SI)(DX*1)
	PREFETCHT0 512(SI)(DX*2)
	PREFETCHT0 512(SI)(R9*1)
	PREFETCHT0 512(R8)
	PREFETCHT0 512(R8)(DX*1)
	PREFETCHT0 512(R8)(DX*2)
	PREFETCHT0 512(R8)(R9*1)
	VCVTPS2PD (SI), Y0
	VCVTPS2PD (SI)(DX*1), Y1
	VCVTPS2PD (SI)(DX*2), Y2
	VCVTPS2PD (SI)(R9*1), Y3
	VCVTPS2PD (R8), Y4
	VCVTPS2PD (R8)(DX*1), Y5
	VCVTPS2PD (R8)(DX*2), Y6
	VCVTPS2PD (R8)(R9*1), Y7
	VPERM2F128 $0x20, Y1, Y0, Y8
	VPERM2F128 $0x31, Y1, Y0, Y0
	VPERM2F128 $0x20, Y3, Y2, Y9
	VPERM2F128 $0x31, Y3, Y2, Y2
	VPERM2F128 $0x20, Y5, Y4, Y10
	VPERM2F128 $0x31, Y5, Y4, Y4
	VPERM2F128 $0x20, Y7, Y6, Y11
	VPERM2F128 $0x31, Y7, Y6, Y6
	VFMADD231PD Y8, Y8, Y12
	VFMADD231PD Y9, Y9, Y13
	VFMADD231PD Y10, Y10, Y14
	VFMADD231PD Y11, Y11, Y15
	VFMADD231PD Y0, Y0, Y12
	VFMADD231PD Y2, Y2, Y13
	VFMADD231PD Y4, Y4, Y14
	VFMADD231PD Y6, Y6, Y15
	ADDQ $16, SI
	ADDQ $16, R8
	DECQ CX
	JMP  ssloop

ssdone:
	// out[b] = a_b + b_b
	VHADDPD Y13, Y12, Y0 // [a0+b0, a2+b2, a1+b1, a3+b3]
	VHADDPD Y15, Y14, Y1 // [a4+b4, a6+b6, a5+b5, a7+b7]
	VPERMPD $0xd8, Y0, Y0 // [0, 1, 2, 3]
	VPERMPD $0xd8, Y1, Y1
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VZEROUPPER
	RET

DATA wyinc<>+0(SB)/8, $0x03b0eb23c5eb2178 // 8·0xa0761d6478bd642f mod 2^64
GLOBL wyinc<>(SB), RODATA|NOPTR, $8
DATA wyc2h<>+0(SB)/8, $0x00000000e7037ed1 // C2 >> 32, four times
DATA wyc2h<>+8(SB)/8, $0x00000000e7037ed1
DATA wyc2h<>+16(SB)/8, $0x00000000e7037ed1
DATA wyc2h<>+24(SB)/8, $0x00000000e7037ed1
GLOBL wyc2h<>(SB), RODATA|NOPTR, $32
DATA ones<>+0(SB)/8, $-1
DATA ones<>+8(SB)/8, $-1
DATA ones<>+16(SB)/8, $-1
DATA ones<>+24(SB)/8, $-1
GLOBL ones<>(SB), RODATA|NOPTR, $32
// VPSHUFB indices that turn r into its two uniforms: dword 2j = bytes 5 6 7
// of qword j (r>>40), dword 2j+1 = bytes 2 3 4 ((r>>16) & 0xffffff).
DATA ushuf2<>+0(SB)/8, $0x8004030280070605
DATA ushuf2<>+8(SB)/8, $0x800c0b0a800f0e0d
DATA ushuf2<>+16(SB)/8, $0x8004030280070605
DATA ushuf2<>+24(SB)/8, $0x800c0b0a800f0e0d
GLOBL ushuf2<>(SB), RODATA|NOPTR, $32

// SDRAW2 makes one wyrand draw on the scalar unit (state R10, advanced by
// R9 = C1 first; R11 = C2) and leaves ¬r in AX.
#define SDRAW2 \
	ADDQ R9, R10; \
	MOVQ R10, AX; \
	MOVQ R10, BX; \
	XORQ R11, BX; \
	MULQ BX; \
	XORQ DX, AX; \
	NOTQ AX

// QUANT8 quantises the 8 floats at XOFF(SI) with u' = 0xffffff − u in U
// into 8 int32 codes in OUT: t = min(cvtt(|x|·sc24), maxT), l = (t + u')>>24
// (= t>>24 + [u < t&0xffffff]), negated where x is negative. Clobbers
// Y0, Y1.
#define QUANT8(XOFF, U, OUT) \
	VMOVDQU    XOFF(SI), Y0; \
	VPAND      Y12, Y0, Y1; \
	VMULPS     Y10, Y1, Y1; \
	VCVTTPS2DQ Y1, Y1; \
	VPMINUD    Y11, Y1, Y1; \
	VPADDD     U, Y1, Y1; \
	VPSRLD     $24, Y1, Y1; \
	VPSIGND    Y0, Y1, OUT

// func qsgdAVX2(codes *byte, x *float32, n int, sc24 float32, maxT uint32, seed uint64) (state uint64)
// qsgdBlockGo on n elements (n a multiple of 16) with sc24 finite and
// maxT ≤ 127·2^24; returns the wyrand state after the n/2 draws. Of the 8
// draws of an iteration, draws 1–4 run in the lanes of Y8 (the 64×64→128
// product from four 32×32→64 VPMULUDQs) and draws 5–8 on the scalar MULQ,
// so that both kinds of units work.
TEXT ·qsgdAVX2(SB), NOSPLIT, $0-48
	MOVQ codes+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	VBROADCASTSS sc24+24(FP), Y10
	MOVL maxT+28(FP), AX
	MOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVL $0x7fffffff, AX
	MOVD AX, X12
	VPBROADCASTD X12, Y12 // |x| mask
	VMOVDQU ushuf2<>(SB), Y13
	VPCMPEQD Y14, Y14, Y14
	VPSRLQ $32, Y14, Y14  // low 32 bits of each qword
	MOVQ $0xe7037ed1a0b428db, R11
	MOVQ R11, X15
	VPBROADCASTQ X15, Y15 // C2
	VPBROADCASTQ wyinc<>(SB), Y9 // 8·C1
	MOVQ $0xa0761d6478bd642f, R9
	MOVQ R9, R12
	SHLQ $2, R12 // 4·C1
	// Y8 = seed + C1·[1 2 3 4]; R10 = seed + 4·C1 (draws 5–8 follow it)
	MOVQ seed+32(FP), R10
	ADDQ R9, R10
	VMOVQ R10, X8
	ADDQ R9, R10
	VPINSRQ $1, R10, X8, X8
	ADDQ R9, R10
	VMOVQ R10, X0
	ADDQ R9, R10
	VPINSRQ $1, R10, X0, X0
	VINSERTI128 $1, X0, Y8, Y8
	// the state after n/2 draws
	MOVQ seed+32(FP), R13
	MOVQ n+16(FP), AX
	SHRQ $1, AX
	IMULQ R9, AX
	ADDQ AX, R13
	MOVQ R13, state+40(FP)

qloop:
	TESTQ CX, CX
	JZ    qdone
	// Draws 1–4: r = hi ^ lo of a·b, a = state, b = a ^ C2.
	VPXOR    Y15, Y8, Y1 // b
	VPSRLQ   $32, Y8, Y2 // aH
	VPXOR    wyc2h<>(SB), Y2, Y3 // bH
	VPMULUDQ Y1, Y8, Y4  // ll
	VPMULUDQ Y3, Y8, Y5  // lh = aL·bH
	VPMULUDQ Y1, Y2, Y6  // hl = aH·bL
	VPMULUDQ Y3, Y2, Y7  // hh
	VPADDQ   Y9, Y8, Y8
	VPSRLQ   $32, Y4, Y0
	VPADDQ   Y0, Y6, Y6  // t = hl + ll>>32 (no carry out)
	VPAND    Y14, Y6, Y0
	VPADDQ   Y0, Y5, Y5  // w = lh + t&M (no carry out)
	VPSRLQ   $32, Y6, Y6
	VPADDQ   Y6, Y7, Y7
	VPSRLQ   $32, Y5, Y0
	VPADDQ   Y0, Y7, Y7  // hi = hh + t>>32 + w>>32
	VPSLLQ   $32, Y5, Y5
	VPBLENDD $0x55, Y4, Y5, Y5 // lo = w<<32 | ll&M
	VPXOR    Y7, Y5, Y4
	VPXOR    ones<>(SB), Y4, Y4 // ¬r
	VPSHUFB  Y13, Y4, Y4 // u' of elements 0–7
	// Draws 5–8 on the scalar unit.
	SDRAW2
	VMOVQ AX, X7
	SDRAW2
	VPINSRQ $1, AX, X7, X7
	SDRAW2
	VMOVQ AX, X5
	SDRAW2
	VPINSRQ $1, AX, X5, X5
	ADDQ R12, R10
	VINSERTI128 $1, X5, Y7, Y7
	VPSHUFB Y13, Y7, Y7 // u' of elements 8–15

	QUANT8(0, Y4, Y4)
	QUANT8(32, Y7, Y7)
	VPACKSSDW  Y7, Y4, Y4  // words [0-3 8-11 | 4-7 12-15]
	VPERMQ     $0xd8, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPACKSSWB  X5, X4, X4
	VMOVDQU    X4, (DI)

	ADDQ $64, SI
	ADDQ $16, DI
	DECQ CX
	JMP  qloop

qdone:
	VZEROUPPER
	RET

// func signBitsAVX2(dst *byte, x *float32, n int) (bad bool)
// packSignBits on n floats (n a multiple of 32).
TEXT ·signBitsAVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	MOVL $0x7f800000, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8
	VMOVDQU revidx<>(SB), Y11
	VPXOR   Y9, Y9, Y9

sbloop:
	TESTQ CX, CX
	JZ    sbdone
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VPERMD    Y0, Y11, Y4
	VMOVMSKPS Y4, AX
	VPERMD    Y1, Y11, Y5
	VMOVMSKPS Y5, BX
	VPERMD    Y2, Y11, Y6
	VMOVMSKPS Y6, DX
	VPERMD    Y3, Y11, Y7
	VMOVMSKPS Y7, R8
	SHLL $8, BX
	SHLL $16, DX
	SHLL $24, R8
	ORL  BX, AX
	ORL  DX, R8
	ORL  R8, AX
	NOTL AX
	MOVL AX, 0(DI)
	VPAND   Y8, Y0, Y0
	VPMAXUD Y0, Y9, Y9
	VPAND   Y8, Y1, Y1
	VPMAXUD Y1, Y9, Y9
	VPAND   Y8, Y2, Y2
	VPMAXUD Y2, Y9, Y9
	VPAND   Y8, Y3, Y3
	VPMAXUD Y3, Y9, Y9
	ADDQ $128, SI
	ADDQ $4, DI
	DECQ CX
	JMP  sbloop

sbdone:
	VPCMPEQD Y8, Y9, Y9
	VPTEST   Y9, Y9
	SETNE    bad+24(FP)
	VZEROUPPER
	RET

// func bf16AVX2(dst *byte, x *float32, n int) (bad bool)
// bfloat16 of n floats (n a multiple of 16), round to nearest even on the
// bits: h = (u + 0x7fff + (u>>16 & 1)) >> 16, as bf16Fast; bad reports a
// NaN or ±Inf (whose bytes are then not meaningful).
TEXT ·bf16AVX2(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVL $0x7f800000, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8
	VPXOR Y9, Y9, Y9
	MOVL $0x7fff, AX
	MOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL $1, AX
	MOVD AX, X11
	VPBROADCASTD X11, Y11

bfloop:
	TESTQ CX, CX
	JZ    bfdone
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VPSRLD  $16, Y0, Y2
	VPSRLD  $16, Y1, Y3
	VPAND   Y11, Y2, Y2
	VPAND   Y11, Y3, Y3
	VPADDD  Y10, Y2, Y2
	VPADDD  Y10, Y3, Y3
	VPADDD  Y0, Y2, Y2
	VPADDD  Y1, Y3, Y3
	VPSRLD  $16, Y2, Y2
	VPSRLD  $16, Y3, Y3
	VPACKUSDW Y3, Y2, Y2 // [a0-3 b0-3 | a4-7 b4-7]
	VPERMQ  $0xd8, Y2, Y2
	VMOVDQU Y2, 0(DI)
	VPAND   Y8, Y0, Y0
	VPMAXUD Y0, Y9, Y9
	VPAND   Y8, Y1, Y1
	VPMAXUD Y1, Y9, Y9
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JMP  bfloop

bfdone:
	VPCMPEQD Y8, Y9, Y9
	VPTEST   Y9, Y9
	SETNE    bad+24(FP)
	VZEROUPPER
	RET

// func bf16AVX2NT(dst *byte, x *float32, n int) (bad bool)
// bf16AVX2 with non-temporal stores: dst 32-byte aligned.
TEXT ·bf16AVX2NT(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVL $0x7f800000, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8
	VPXOR Y9, Y9, Y9
	MOVL $0x7fff, AX
	MOVD AX, X10
	VPBROADCASTD X10, Y10
	MOVL $1, AX
	MOVD AX, X11
	VPBROADCASTD X11, Y11

bfntloop:
	TESTQ CX, CX
	JZ    bfntdone
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VPSRLD  $16, Y0, Y2
	VPSRLD  $16, Y1, Y3
	VPAND   Y11, Y2, Y2
	VPAND   Y11, Y3, Y3
	VPADDD  Y10, Y2, Y2
	VPADDD  Y10, Y3, Y3
	VPADDD  Y0, Y2, Y2
	VPADDD  Y1, Y3, Y3
	VPSRLD  $16, Y2, Y2
	VPSRLD  $16, Y3, Y3
	VPACKUSDW Y3, Y2, Y2 // [a0-3 b0-3 | a4-7 b4-7]
	VPERMQ  $0xd8, Y2, Y2
	VMOVNTDQ Y2, 0(DI)
	VPAND   Y8, Y0, Y0
	VPMAXUD Y0, Y9, Y9
	VPAND   Y8, Y1, Y1
	VPMAXUD Y1, Y9, Y9
	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JMP  bfntloop

bfntdone:
	SFENCE
	VPCMPEQD Y8, Y9, Y9
	VPTEST   Y9, Y9
	SETNE    bad+24(FP)
	VZEROUPPER
	RET

// func qsgdDecodeAVX2(dst *float32, codes *byte, n int, u float32)
// dst[i] = u·float32(int8(codes[i])) for n elements (n a multiple of 32).
TEXT ·qsgdDecodeAVX2(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ codes+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VBROADCASTSS u+24(FP), Y15

qdloop:
	TESTQ CX, CX
	JZ    qddone
	VPMOVSXBD 0(SI), Y0
	VPMOVSXBD 8(SI), Y1
	VPMOVSXBD 16(SI), Y2
	VPMOVSXBD 24(SI), Y3
	VCVTDQ2PS Y0, Y0
	VCVTDQ2PS Y1, Y1
	VCVTDQ2PS Y2, Y2
	VCVTDQ2PS Y3, Y3
	VMULPS    Y15, Y0, Y0
	VMULPS    Y15, Y1, Y1
	VMULPS    Y15, Y2, Y2
	VMULPS    Y15, Y3, Y3
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ $32, SI
	ADDQ $128, DI
	DECQ CX
	JMP  qdloop

qddone:
	VZEROUPPER
	RET

// func maxMagAVX2(x *float32, n int) uint32
// The largest magnitude key (bits &^ sign) of n floats (n a multiple of
// 32); NaNs compare above +Inf.
TEXT ·maxMagAVX2(SB), NOSPLIT, $0-20
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	MOVL $0x7fffffff, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3

mmloop:
	TESTQ CX, CX
	JZ    mmdone
	VPAND   0(SI), Y8, Y4
	VPAND   32(SI), Y8, Y5
	VPAND   64(SI), Y8, Y6
	VPAND   96(SI), Y8, Y7
	VPMAXUD Y4, Y0, Y0
	VPMAXUD Y5, Y1, Y1
	VPMAXUD Y6, Y2, Y2
	VPMAXUD Y7, Y3, Y3
	ADDQ $128, SI
	DECQ CX
	JMP  mmloop

mmdone:
	VPMAXUD Y1, Y0, Y0
	VPMAXUD Y3, Y2, Y2
	VPMAXUD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPMAXUD X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPMAXUD X1, X0, X0
	MOVL X0, AX
	MOVL AX, ret+16(FP)
	VZEROUPPER
	RET

// func maxAbsI8AVX2(b *byte, n int) uint8
// The largest |int8(b[i])| of n bytes (n a multiple of 32), −128 giving 128.
TEXT ·maxAbsI8AVX2(SB), NOSPLIT, $0-17
	MOVQ b+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1

malooop:
	CMPQ CX, $2
	JB   maltail
	VPABSB  0(SI), Y2
	VPABSB  32(SI), Y3
	VPMAXUB Y2, Y0, Y0
	VPMAXUB Y3, Y1, Y1
	ADDQ $64, SI
	SUBQ $2, CX
	JMP  malooop

maltail:
	TESTQ CX, CX
	JZ    maldone
	VPABSB  0(SI), Y2
	VPMAXUB Y2, Y0, Y0

maldone:
	VPMAXUB Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUB X1, X0, X0
	VPSHUFD $0x4e, X0, X1
	VPMAXUB X1, X0, X0
	VPSHUFD $0xb1, X0, X1
	VPMAXUB X1, X0, X0
	VPSRLD  $16, X0, X1
	VPMAXUB X1, X0, X0
	VPSRLW  $8, X0, X1
	VPMAXUB X1, X0, X0
	MOVL X0, AX
	MOVB AL, ret+16(FP)
	VZEROUPPER
	RET

// func bf16DecodeAVX2(dst *float32, src *byte, n int)
// dst[i] = float32 bits (src half i) << 16, n a multiple of 16.
TEXT ·bf16DecodeAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX

bdloop:
	TESTQ CX, CX
	JZ    bddone
	VPMOVZXWD 0(SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VMOVDQU   Y0, 0(DI)
	VMOVDQU   Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JMP  bdloop

bddone:
	VZEROUPPER
	RET

// ---- terngrad (AVX2) ----

// (e+1)·Golden for the element e that each qword lane of the two draw
// vectors serves: A = [7 6 3 2], B = [5 4 1 0], so that VSHUFPS $0xdd of
// their high dwords lists elements 7..0 (VMOVMSKPS then gives MSB first).
DATA tern2off<>+0(SB)/8, $0xf1bbcdcbfa53e0a8
DATA tern2off<>+8(SB)/8, $0x538454127b096493
DATA tern2off<>+16(SB)/8, $0x78dde6e5fd29f054
DATA tern2off<>+24(SB)/8, $0xdaa66d2c7ddf743f
DATA tern2off<>+32(SB)/8, $0xb54cda58fbbee87e
DATA tern2off<>+40(SB)/8, $0x1715609f7c746c69
DATA tern2off<>+48(SB)/8, $0x3c6ef372fe94f82a
DATA tern2off<>+56(SB)/8, $0x9e3779b97f4a7c15
GLOBL tern2off<>(SB), RODATA|NOPTR, $64
DATA absmask<>+0(SB)/8, $0x7fffffff7fffffff
DATA absmask<>+8(SB)/8, $0x7fffffff7fffffff
DATA absmask<>+16(SB)/8, $0x7fffffff7fffffff
DATA absmask<>+24(SB)/8, $0x7fffffff7fffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $32

// MIX2 is Mix64 without its last xor-shift (bits 40–63 do not need it),
// leaving those bits in the high dword of each qword of Z (the low dword
// is garbage). Y14 = C1 & M and Y12 = C2 & M (the low halves, qwords),
// Y13 and Y11 their halves swapped (lo dword C>>32, hi dword C & M):
// z·C = zL·CL + (zL·CH + zH·CL)<<32, the cross terms from one VPMULLD of
// both halves at once, added per dword (no carry crosses into the high
// dword from a zero low one). Clobbers T1, T2.
#define MIX2(Z, T1, T2) \
	VPSRLQ   $30, Z, T1; \
	VPXOR    T1, Z, Z; \
	VPMULLD  Y13, Z, T1; \
	VPMULUDQ Y14, Z, Z; \
	VPSLLQ   $32, T1, T2; \
	VPAND    himask<>(SB), T1, T1; \
	VPADDD   T2, Z, Z; \
	VPADDD   T1, Z, Z; \
	VPSRLQ   $27, Z, T1; \
	VPXOR    T1, Z, Z; \
	VPMULLD  Y11, Z, T1; \
	VPMULUDQ Y12, Z, Z; \
	VPSLLQ   $32, T1, T2; \
	VPADDD   T1, Z, Z; \
	VPADDD   T2, Z, Z

DATA himask<>+0(SB)/8, $0xffffffff00000000
DATA himask<>+8(SB)/8, $0xffffffff00000000
DATA himask<>+16(SB)/8, $0xffffffff00000000
DATA himask<>+24(SB)/8, $0xffffffff00000000
GLOBL himask<>(SB), RODATA|NOPTR, $32

// SHASH is MIX2 on the scalar unit for z = R10 (then R10 −= Golden, in
// R13): Mix64 without its last xor-shift into OUT (R11 = C1, R12 = C2).
// Clobbers BX.
#define SHASH(OUT) \
	MOVQ  R10, OUT; \
	SHRQ  $30, OUT; \
	XORQ  R10, OUT; \
	IMULQ R11, OUT; \
	MOVQ  OUT, BX; \
	SHRQ  $27, BX; \
	XORQ  BX, OUT; \
	IMULQ R12, OUT; \
	SUBQ  R13, R10

// SPAIR hashes elements e+1 (R10) and e into AX: the high dword of
// e+1's in the low half, e's in the high half (R14 = the high-half mask),
// the lane order of VSHUFPS $0xdd. Clobbers BX, DX.
#define SPAIR \
	SHASH(AX); \
	SHASH(DX); \
	SHRQ $32, AX; \
	ANDQ R14, DX; \
	ORQ  DX, AX

// SDRAW8 hashes 8 elements on the scalar unit (four SPAIRs) into YL,
// pairs in the order drawn (X4 a temporary), then adds STEP to R10.
#define SDRAW8(XL, YL, STEP) \
	SPAIR; \
	VMOVQ   AX, XL; \
	SPAIR; \
	VPINSRQ $1, AX, XL, XL; \
	SPAIR; \
	VMOVQ   AX, X4; \
	SPAIR; \
	VPINSRQ $1, AX, X4, X4; \
	MOVQ    STEP, BX; \
	ADDQ    BX, R10; \
	VINSERTI128 $1, X4, YL, YL

// MIX2CONST loads MIX2's constants (Y11–Y14) and SHASH's (R11, R12,
// R14). Clobbers AX.
#define MIX2CONST \
	MOVL $0x1ce4e5b9, AX; \
	VMOVQ AX, X14; \
	VPBROADCASTQ X14, Y14; \
	MOVQ $0x1ce4e5b9bf58476d, AX; \
	VMOVQ AX, X13; \
	VPBROADCASTQ X13, Y13; \
	MOVL $0x133111eb, AX; \
	VMOVQ AX, X12; \
	VPBROADCASTQ X12, Y12; \
	MOVQ $0x133111eb94d049bb, AX; \
	VMOVQ AX, X11; \
	VPBROADCASTQ X11, Y11; \
	MOVQ $0xbf58476d1ce4e5b9, R11; \
	MOVQ $0x94d049bb133111eb, R12; \
	MOVQ $0xffffffff00000000, R14

// U2P turns the dwords of U (24-bit uniforms in bits 8–31) into floats
// u = (U>>8)·2^-24.
#define U2P(U) \
	VPSRLD    $8, U, U; \
	VCVTDQ2PS U, U; \
	VMULPS    Y9, U, U

// TCMP compares the uniforms U of 8 elements (lanes reversed) with p =
// float32(float64(|x|)·inv) of the 8 floats at OFF(SI): SENT gets the
// mask u < p, SIGN the sign mask, MSB first. Clobbers Y1–Y3, U.
#define TCMP(OFF, U, SENT, SIGN) \
	VPERMD       OFF(SI), Y8, Y1; \
	VMOVMSKPS    Y1, SIGN; \
	VPAND        absmask<>(SB), Y1, Y1; \
	VCVTPS2PD    X1, Y2; \
	VEXTRACTF128 $1, Y1, X3; \
	VCVTPS2PD    X3, Y3; \
	VMULPD       Y10, Y2, Y2; \
	VMULPD       Y10, Y3, Y3; \
	VCVTPD2PSY   Y2, X2; \
	VCVTPD2PSY   Y3, X3; \
	VINSERTF128  $1, X3, Y2, Y2; \
	VCMPPS       $1, Y2, U, U; \
	VMOVMSKPS    U, SENT

// func ternAVX2(bits *byte, nb int, x *float32, n int, inv float64, base uint64)
// ternAVX512 with AVX2, 16 elements (two bytes of each plane) an
// iteration, n a multiple of 16: the draws of elements 0–7 in the lanes
// of two vectors (MIX2), those of 8–15 on the scalar unit (SHASH), so
// that both kinds of units work.
TEXT ·ternAVX2(SB), NOSPLIT, $0-48
	MOVQ bits+0(FP), DI
	MOVQ nb+8(FP), R8
	ADDQ DI, R8
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	VBROADCASTSD inv+32(FP), Y10
	MOVQ base+40(FP), AX
	MOVQ AX, X6
	VPBROADCASTQ X6, Y6
	VPADDQ tern2off<>+32(SB), Y6, Y5
	VPADDQ tern2off<>+0(SB), Y6, Y6
	MOVQ $0xe3779b97f4a7c150, R10 // 16·Golden
	MOVQ R10, X15
	VPBROADCASTQ X15, Y15
	ADDQ AX, R10 // z of element 15
	MIX2CONST
	MOVL $0x33800000, AX // 2^-24
	MOVD AX, X9
	VPBROADCASTD X9, Y9
	VMOVDQU revidx<>(SB), Y8
	MOVQ $0x9e3779b97f4a7c15, R13

t2loop:
	TESTQ CX, CX
	JZ    t2done
	// elements 8–15, from 15 down, on the scalar unit
	SDRAW8(X7, Y7, $0xd5336963eefba1f8) // then 24·Golden: to element 15 of the next iteration
	// elements 0–7 in vector lanes
	VMOVDQA Y6, Y0
	VMOVDQA Y5, Y1
	VPADDQ  Y15, Y6, Y6
	VPADDQ  Y15, Y5, Y5
	MIX2(Y0, Y2, Y3)
	MIX2(Y1, Y2, Y3)
	VSHUFPS $0xdd, Y1, Y0, Y0 // elements 7..0
	U2P(Y0)
	U2P(Y7)
	TCMP(0, Y0, BX, AX)
	TCMP(32, Y7, R9, DX)
	SHLL $8, R9
	ORL  R9, BX // sent
	SHLL $8, DX
	ORL  DX, AX // negative
	MOVL AX, DX
	NOTL DX
	ANDL BX, DX // sent and positive
	ANDL BX, AX // sent and negative
	MOVW DX, (DI)
	MOVW AX, (R8)
	ADDQ $64, SI
	ADDQ $2, DI
	ADDQ $2, R8
	DECQ CX
	JMP  t2loop

t2done:
	VZEROUPPER
	RET

// ---- natural (AVX2) ----

// (e+1)·Golden for lanes A = [0 1 4 5], B = [2 3 6 7]: VSHUFPS $0xdd of
// their high dwords lists elements 0..7.
DATA nat2off<>+0(SB)/8, $0x9e3779b97f4a7c15
DATA nat2off<>+8(SB)/8, $0x3c6ef372fe94f82a
DATA nat2off<>+16(SB)/8, $0x1715609f7c746c69
DATA nat2off<>+24(SB)/8, $0xb54cda58fbbee87e
DATA nat2off<>+32(SB)/8, $0xdaa66d2c7ddf743f
DATA nat2off<>+40(SB)/8, $0x78dde6e5fd29f054
DATA nat2off<>+48(SB)/8, $0x538454127b096493
DATA nat2off<>+56(SB)/8, $0xf1bbcdcbfa53e0a8
GLOBL nat2off<>(SB), RODATA|NOPTR, $64
// nat2d is nat2off's second half minus its first (lane by lane).
DATA nat2d<>+0(SB)/8, $0x3c6ef372fe94f82a
DATA nat2d<>+8(SB)/8, $0x3c6ef372fe94f82a
DATA nat2d<>+16(SB)/8, $0x3c6ef372fe94f82a
DATA nat2d<>+24(SB)/8, $0x3c6ef372fe94f82a
GLOBL nat2d<>(SB), RODATA|NOPTR, $32
DATA manmask<>+0(SB)/8, $0x007fffff007fffff
DATA manmask<>+8(SB)/8, $0x007fffff007fffff
DATA manmask<>+16(SB)/8, $0x007fffff007fffff
DATA manmask<>+24(SB)/8, $0x007fffff007fffff
GLOBL manmask<>(SB), RODATA|NOPTR, $32
DATA c27<>+0(SB)/8, $0x0000001b0000001b
DATA c27<>+8(SB)/8, $0x0000001b0000001b
DATA c27<>+16(SB)/8, $0x0000001b0000001b
DATA c27<>+24(SB)/8, $0x0000001b0000001b
GLOBL c27<>(SB), RODATA|NOPTR, $32
DATA c127<>+0(SB)/8, $0x0000007f0000007f
DATA c127<>+8(SB)/8, $0x0000007f0000007f
DATA c127<>+16(SB)/8, $0x0000007f0000007f
DATA c127<>+24(SB)/8, $0x0000007f0000007f
GLOBL c127<>(SB), RODATA|NOPTR, $32
DATA c80<>+0(SB)/8, $0x0000008000000080
DATA c80<>+8(SB)/8, $0x0000008000000080
DATA c80<>+16(SB)/8, $0x0000008000000080
DATA c80<>+24(SB)/8, $0x0000008000000080
GLOBL c80<>(SB), RODATA|NOPTR, $32
DATA c28<>+0(SB)/8, $0x0000001c0000001c
DATA c28<>+8(SB)/8, $0x0000001c0000001c
DATA c28<>+16(SB)/8, $0x0000001c0000001c
DATA c28<>+24(SB)/8, $0x0000001c0000001c
GLOBL c28<>(SB), RODATA|NOPTR, $32
DATA cinfm1<>+0(SB)/8, $0x7f7fffff7f7fffff
DATA cinfm1<>+8(SB)/8, $0x7f7fffff7f7fffff
DATA cinfm1<>+16(SB)/8, $0x7f7fffff7f7fffff
DATA cinfm1<>+24(SB)/8, $0x7f7fffff7f7fffff
GLOBL cinfm1<>(SB), RODATA|NOPTR, $32

// NAT8 turns the uniforms U (r>>32 of 8 elements, in order) and the 8
// floats at OFF(SI) into 8 codes (dwords) in OUT, and takes their
// largest magnitude into Y10. Clobbers Y1–Y4, Y8, U.
#define NAT8(OFF, U, OUT) \
	VPSRLD    $9, U, Y1; \
	VPSRLD    $8, U, U; \
	VMOVDQU   OFF(SI), Y2; \
	VPAND     absmask<>(SB), Y2, Y3; \
	VPMAXUD   Y3, Y10, Y10; \
	VPSRLD    $23, Y3, Y4; \
	VPAND     manmask<>(SB), Y3, Y8; \
	VPCMPGTD  Y1, Y8, Y8; \
	VPSUBD    c27<>(SB), Y4, Y1; \
	VPSUBD    Y8, Y1, Y1; \
	VPMINSD   c127<>(SB), Y1, Y1; \
	VCVTDQ2PS U, U; \
	VMULPS    Y9, Y3, Y3; \
	VCMPPS    $1, Y3, U, U; \
	VPSRLD    $31, U, U; \
	VPCMPGTD  Y4, Y7, Y4; \
	VBLENDVPS Y4, U, Y1, Y1; \
	VPSRAD    $31, Y2, Y2; \
	VPXOR     Y3, Y3, Y3; \
	VPCMPEQD  Y3, Y1, Y3; \
	VPANDN    Y2, Y3, Y3; \
	VPAND     c80<>(SB), Y3, Y3; \
	VPOR      Y3, Y1, OUT

// func naturalAVX2(codes *byte, x *float32, n int, base uint64) (bad bool)
// naturalAVX512 with AVX2, 16 elements an iteration, n a multiple of 16:
// the draws of elements 0–7 in vector lanes (MIX2), those of 8–15 on the
// scalar unit (SHASH, ascending: R13 holds −Golden).
TEXT ·naturalAVX2(SB), NOSPLIT, $0-33
	MOVQ codes+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVQ base+24(FP), AX
	MOVQ AX, X6
	VPBROADCASTQ X6, Y6
	VPADDQ nat2off<>+0(SB), Y6, Y6
	MOVQ $0xe3779b97f4a7c150, R10 // 16·Golden
	MOVQ R10, X15
	VPBROADCASTQ X15, Y15
	MOVQ $0x8ff34785799e5cbd, R10 // 9·Golden
	ADDQ AX, R10                  // z of element 8
	MOVQ $0x61c8864680b583eb, R13 // −Golden
	MIX2CONST
	MOVL $0x7d000000, AX // 2^123
	MOVD AX, X9
	VPBROADCASTD X9, Y9
	VMOVDQU c28<>(SB), Y7
	VPXOR Y10, Y10, Y10 // largest magnitude seen

n2loop:
	TESTQ CX, CX
	JZ    n2done
	// elements 8–15 on the scalar unit
	SDRAW8(X5, Y5, $0xf1bbcdcbfa53e0a8) // then 8·Golden: to element 8 of the next iteration
	// elements 0–7 in vector lanes
	VPADDQ  nat2d<>(SB), Y6, Y1
	VMOVDQA Y6, Y0
	VPADDQ  Y15, Y6, Y6
	MIX2(Y0, Y2, Y3)
	MIX2(Y1, Y2, Y3)
	VSHUFPS $0xdd, Y1, Y0, Y0 // r>>32 of elements 0..7
	NAT8(0, Y0, Y0)
	NAT8(32, Y5, Y5)
	VPACKUSDW Y5, Y0, Y0 // words [0-3 8-11 | 4-7 12-15]
	VPERMQ    $0xd8, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPACKUSWB X1, X0, X0
	VMOVDQU   X0, (DI)
	ADDQ $64, SI
	ADDQ $16, DI
	DECQ CX
	JMP  n2loop

n2done:
	VPCMPGTD cinfm1<>(SB), Y10, Y10 // a key above the largest finite one
	VPTEST   Y10, Y10
	SETNE    bad+32(FP)
	VZEROUPPER
	RET

// func f16AVXNT(dst *byte, x *float32, n int) (bad bool)
// f16AVX for n a multiple of 32 and dst 32-byte aligned, with
// non-temporal stores (for tensors beyond the caches).
TEXT ·f16AVXNT(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	MOVL $0x7f800000, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8
	VPXOR Y9, Y9, Y9

f16ntloop:
	TESTQ CX, CX
	JZ    f16ntdone
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VCVTPS2PH $0, Y0, X4
	VCVTPS2PH $0, Y1, X5
	VCVTPS2PH $0, Y2, X6
	VCVTPS2PH $0, Y3, X7
	VINSERTI128 $1, X5, Y4, Y4
	VINSERTI128 $1, X7, Y6, Y6
	VMOVNTDQ Y4, 0(DI)
	VMOVNTDQ Y6, 32(DI)
	VPAND   Y8, Y0, Y0
	VPAND   Y8, Y1, Y1
	VPAND   Y8, Y2, Y2
	VPAND   Y8, Y3, Y3
	VPMAXUD Y0, Y9, Y9
	VPMAXUD Y1, Y9, Y9
	VPMAXUD Y2, Y9, Y9
	VPMAXUD Y3, Y9, Y9
	ADDQ $128, SI
	ADDQ $64, DI
	DECQ CX
	JMP  f16ntloop

f16ntdone:
	SFENCE
	VPCMPEQD Y8, Y9, Y9
	VPTEST   Y9, Y9
	SETNE    bad+24(FP)
	VZEROUPPER
	RET

// ---- fp16 decode (F16C) ----

// func f16DecodeAVX(dst *float32, src *byte, n int)
TEXT ·f16DecodeAVX(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX

fdloop:
	TESTQ CX, CX
	JZ    fddone
	VCVTPH2PS 0(SI), Y0
	VCVTPH2PS 16(SI), Y1
	VCVTPH2PS 32(SI), Y2
	VCVTPH2PS 48(SI), Y3
	VMOVUPS   Y0, 0(DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	ADDQ $64, SI
	ADDQ $128, DI
	DECQ CX
	JMP  fdloop

fddone:
	VZEROUPPER
	RET

// ---- natural decode (AVX2) ----

// func naturalDecodeAVX2(dst *float32, src *byte, n int)
//
// code b → bits (b&0x80)<<24 | ((b&0x7f)+27)<<23, or +0 when b&0x7f is 0:
// ±2^((b&0x7f)−100), naturalValue's value.
TEXT ·naturalDecodeAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVL $0x7f, AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8 // 0x7f
	MOVL $0x80, AX
	MOVD AX, X9
	VPBROADCASTD X9, Y9 // 0x80
	MOVL $27, AX
	MOVD AX, X10
	VPBROADCASTD X10, Y10 // 27
	VPXOR Y11, Y11, Y11 // 0

ndloop:
	TESTQ CX, CX
	JZ    nddone
	VPMOVZXBD 0(SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPAND     Y9, Y0, Y2
	VPAND     Y9, Y1, Y3
	VPSLLD    $24, Y2, Y2
	VPSLLD    $24, Y3, Y3
	VPAND     Y8, Y0, Y0
	VPAND     Y8, Y1, Y1
	VPCMPEQD  Y11, Y0, Y4
	VPCMPEQD  Y11, Y1, Y5
	VPADDD    Y10, Y0, Y0
	VPADDD    Y10, Y1, Y1
	VPSLLD    $23, Y0, Y0
	VPSLLD    $23, Y1, Y1
	VPOR      Y2, Y0, Y0
	VPOR      Y3, Y1, Y1
	VPANDN    Y0, Y4, Y0
	VPANDN    Y1, Y5, Y1
	VMOVDQU   Y0, 0(DI)
	VMOVDQU   Y1, 32(DI)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JMP  ndloop

nddone:
	VZEROUPPER
	RET

// ---- MSTopK's counts and selection (AVX2) ----

// Magnitude keys (bits & 0x7fffffff) are compared with VPCMPGTD against
// tm1 = tk − 1 as int32: key ≥ tk for every tk ≤ 0x7f800001 (KeyCeil's
// range; tk = 0 gives −1, every key).

// func geMaskAVX2(x *float32, n int, tm1 int32, dst *uint32)
//
// Bit j of dst[w] is set where element 32w+j of the n floats (n a multiple
// of 32) has a magnitude key > tm1 as int32.
TEXT ·geMaskAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	MOVL tm1+16(FP), AX
	MOVD AX, X8
	VPBROADCASTD X8, Y8
	MOVL $0x7fffffff, AX
	MOVD AX, X9
	VPBROADCASTD X9, Y9
	MOVQ dst+24(FP), DI

gmloop:
	TESTQ CX, CX
	JZ    gmdone
	VPAND    0(SI), Y9, Y4
	VPAND    32(SI), Y9, Y5
	VPAND    64(SI), Y9, Y6
	VPAND    96(SI), Y9, Y7
	VPCMPGTD Y8, Y4, Y4
	VPCMPGTD Y8, Y5, Y5
	VPCMPGTD Y8, Y6, Y6
	VPCMPGTD Y8, Y7, Y7
	VMOVMSKPS Y4, AX
	VMOVMSKPS Y5, BX
	VMOVMSKPS Y6, DX
	VMOVMSKPS Y7, R8
	SHLL $8, BX
	SHLL $16, DX
	SHLL $24, R8
	ORL  BX, AX
	ORL  DX, AX
	ORL  R8, AX
	MOVL AX, 0(DI)
	ADDQ $128, SI
	ADDQ $4, DI
	DECQ CX
	JMP  gmloop

gmdone:
	VZEROUPPER
	RET

// SUMLANES adds the eight dword counters of C (XC its low half; unsigned,
// each < 2^32) into the qword at OFF(DI). Clobbers C, Y5, Y14.
#define SUMLANES(C, XC, OFF) \
	VPXOR        Y14, Y14, Y14; \
	VPUNPCKHDQ   Y14, C, Y5; \
	VPUNPCKLDQ   Y14, C, C; \
	VPADDQ       Y5, C, C; \
	VEXTRACTI128 $1, C, X5; \
	VPADDQ       X5, XC, XC; \
	VPSHUFD      $0x4e, XC, X5; \
	VPADDQ       X5, XC, XC; \
	VMOVQ        XC, OFF(DI)

// func countGE3AVX2(x *float32, n int, tm1 *[3]int32, out *[3]int)
//
// Three counts in one pass over the n floats (n a multiple of 32,
// n < 2^35): out[j] = the keys > tm1[j] as int32. Each lane subtracts its
// compare masks (−1 where true) from a dword counter per threshold.
TEXT ·countGE3AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $5, CX
	MOVQ tm1+16(FP), AX
	VPBROADCASTD 0(AX), Y10
	VPBROADCASTD 4(AX), Y11
	VPBROADCASTD 8(AX), Y12
	MOVL $0x7fffffff, AX
	MOVD AX, X9
	VPBROADCASTD X9, Y9
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2

c3loop:
	TESTQ CX, CX
	JZ    c3done
	VPAND    0(SI), Y9, Y4
	VPAND    32(SI), Y9, Y5
	VPAND    64(SI), Y9, Y6
	VPAND    96(SI), Y9, Y7
	VPCMPGTD Y10, Y4, Y3
	VPSUBD   Y3, Y0, Y0
	VPCMPGTD Y10, Y5, Y3
	VPSUBD   Y3, Y0, Y0
	VPCMPGTD Y10, Y6, Y3
	VPSUBD   Y3, Y0, Y0
	VPCMPGTD Y10, Y7, Y3
	VPSUBD   Y3, Y0, Y0
	VPCMPGTD Y11, Y4, Y8
	VPSUBD   Y8, Y1, Y1
	VPCMPGTD Y11, Y5, Y8
	VPSUBD   Y8, Y1, Y1
	VPCMPGTD Y11, Y6, Y8
	VPSUBD   Y8, Y1, Y1
	VPCMPGTD Y11, Y7, Y8
	VPSUBD   Y8, Y1, Y1
	VPCMPGTD Y12, Y4, Y13
	VPSUBD   Y13, Y2, Y2
	VPCMPGTD Y12, Y5, Y13
	VPSUBD   Y13, Y2, Y2
	VPCMPGTD Y12, Y6, Y13
	VPSUBD   Y13, Y2, Y2
	VPCMPGTD Y12, Y7, Y13
	VPSUBD   Y13, Y2, Y2
	ADDQ $128, SI
	DECQ CX
	JMP  c3loop

c3done:
	// a lane takes four compares per 32 elements, so it counts at most
	// n/8 < 2^32
	MOVQ out+24(FP), DI
	SUMLANES(Y0, X0, 0)
	SUMLANES(Y1, X1, 8)
	SUMLANES(Y2, X2, 16)
	VZEROUPPER
	RET

// ---- terngrad decode (AVX2) ----

// ternbits<> holds, for group g of 8 lanes (32 bytes each), bit 7−e of
// byte g for lane e (the planes are MSB first): the masks of a dword that
// holds four plane bytes.
DATA ternbits<>+0(SB)/4, $0x80
DATA ternbits<>+4(SB)/4, $0x40
DATA ternbits<>+8(SB)/4, $0x20
DATA ternbits<>+12(SB)/4, $0x10
DATA ternbits<>+16(SB)/4, $0x8
DATA ternbits<>+20(SB)/4, $0x4
DATA ternbits<>+24(SB)/4, $0x2
DATA ternbits<>+28(SB)/4, $0x1
DATA ternbits<>+32(SB)/4, $0x8000
DATA ternbits<>+36(SB)/4, $0x4000
DATA ternbits<>+40(SB)/4, $0x2000
DATA ternbits<>+44(SB)/4, $0x1000
DATA ternbits<>+48(SB)/4, $0x800
DATA ternbits<>+52(SB)/4, $0x400
DATA ternbits<>+56(SB)/4, $0x200
DATA ternbits<>+60(SB)/4, $0x100
DATA ternbits<>+64(SB)/4, $0x800000
DATA ternbits<>+68(SB)/4, $0x400000
DATA ternbits<>+72(SB)/4, $0x200000
DATA ternbits<>+76(SB)/4, $0x100000
DATA ternbits<>+80(SB)/4, $0x80000
DATA ternbits<>+84(SB)/4, $0x40000
DATA ternbits<>+88(SB)/4, $0x20000
DATA ternbits<>+92(SB)/4, $0x10000
DATA ternbits<>+96(SB)/4, $0x80000000
DATA ternbits<>+100(SB)/4, $0x40000000
DATA ternbits<>+104(SB)/4, $0x20000000
DATA ternbits<>+108(SB)/4, $0x10000000
DATA ternbits<>+112(SB)/4, $0x8000000
DATA ternbits<>+116(SB)/4, $0x4000000
DATA ternbits<>+120(SB)/4, $0x2000000
DATA ternbits<>+124(SB)/4, $0x1000000
GLOBL ternbits<>(SB), RODATA|NOPTR, $128

// TERN8 writes the 8 floats at OFF(DI) of the plane dwords Y0 (plane 1)
// and Y1 (plane 2) broadcast to every lane, M the lanes' bit masks:
// plane 1 → s (Y8), else plane 2 → −s (Y9), else 0. Clobbers Y2, Y3.
#define TERN8(M, OFF) \
	VPAND    M, Y0, Y2; \
	VPAND    M, Y1, Y3; \
	VPCMPEQD M, Y2, Y2; \
	VPCMPEQD M, Y3, Y3; \
	VPANDN   Y3, Y2, Y3; \
	VPAND    Y8, Y2, Y2; \
	VPAND    Y9, Y3, Y3; \
	VPOR     Y3, Y2, Y2; \
	VMOVUPS  Y2, OFF(DI)

// func ternDecodeAVX2(dst *float32, bits *byte, nb int, n int, s float32)
// TernGrad's decoder for n elements (n a multiple of 8) from a byte
// boundary: plane 1 (bits) → s, else plane 2 (bits[nb:]) → −s, else 0.
// Four bytes of each plane (32 elements) are broadcast to every lane and
// tested against the lanes' bits; the last 8–24 elements a byte at a time.
// (A legacy MOVD from a general register here, with the upper halves
// dirty, made the loop several times slower: only VEX broadcasts.)
TEXT ·ternDecodeAVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ bits+8(FP), SI
	MOVQ nb+16(FP), R8
	ADDQ SI, R8
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	VBROADCASTSS s+32(FP), Y8
	VPCMPEQD Y9, Y9, Y9
	VPSLLD   $31, Y9, Y9
	VPXOR    Y8, Y9, Y9 // −s (the sign bit flipped, as Go's -s)
	VMOVDQU ternbits<>+0(SB), Y10
	VMOVDQU ternbits<>+32(SB), Y11
	VMOVDQU ternbits<>+64(SB), Y12
	VMOVDQU ternbits<>+96(SB), Y13

tav32:
	CMPQ CX, $4
	JLT  tav8
	VPBROADCASTD (SI), Y0
	VPBROADCASTD (R8), Y1
	TERN8(Y10, 0)
	TERN8(Y11, 32)
	TERN8(Y12, 64)
	TERN8(Y13, 96)
	ADDQ $4, SI
	ADDQ $4, R8
	ADDQ $128, DI
	SUBQ $4, CX
	JMP  tav32

tav8:
	TESTQ CX, CX
	JZ    tavdone
	VPBROADCASTB (SI), Y0
	VPBROADCASTB (R8), Y1
	TERN8(Y10, 0)
	INCQ SI
	INCQ R8
	ADDQ $32, DI
	DECQ CX
	JMP  tav8

tavdone:
	VZEROUPPER
	RET

// SIGNUM8 updates the 8 momenta at OFF(SI) with the 8 inputs at OFF(R9):
// m = b·m + a·x (Y14 = b, Y15 = a; two roundings and an add, no FMA, as
// Go's float32(b·m) + float32(a·x)), stores m, and leaves its sign mask,
// lanes reversed (MSB first), in REG.
#define SIGNUM8(OFF, REG) \
	VMULPS    OFF(SI), Y14, Y0; \
	VMULPS    OFF(R9), Y15, Y1; \
	VADDPS    Y1, Y0, Y0; \
	VMOVUPS   Y0, OFF(SI); \
	VPERMD    Y0, Y11, Y0; \
	VMOVMSKPS Y0, REG

// func signumAVX2(dst *byte, m *float32, x *float32, n int, b, a float32)
// signumGo on n elements (n a multiple of 32): the momentum update and
// the packing of 1 − signbit(m) in one pass.
TEXT ·signumAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ m+8(FP), SI
	MOVQ x+16(FP), R9
	MOVQ n+24(FP), CX
	SHRQ $5, CX
	VBROADCASTSS b+32(FP), Y14
	VBROADCASTSS a+36(FP), Y15
	VMOVDQU revidx<>(SB), Y11

smloop:
	TESTQ CX, CX
	JZ    smdone
	SIGNUM8(0, AX)
	SIGNUM8(32, BX)
	SIGNUM8(64, DX)
	SIGNUM8(96, R8)
	SHLL $8, BX
	SHLL $16, DX
	SHLL $24, R8
	ORL  BX, AX
	ORL  DX, R8
	ORL  R8, AX
	NOTL AX
	MOVL AX, 0(DI)
	ADDQ $128, SI
	ADDQ $128, R9
	ADDQ $4, DI
	DECQ CX
	JMP  smloop

smdone:
	VZEROUPPER
	RET

// C7 counts lane by lane the keys of Y15 above the threshold T into C
// (C −= the compare mask). Clobbers Y14.
#define C7(T, C) \
	VPCMPGTD T, Y15, Y14; \
	VPSUBD   Y14, C, C

// func countGE7AVX2(x *float32, n int, tm1 *[7]int32, out *[7]int)
//
// countGE3AVX2 for seven thresholds (three steps of MSTopK's bisection a
// pass), 8 elements an iteration, n a multiple of 8 and n < 2^35: the key
// is the float with its sign shifted out and back (no mask register), the
// counters Y0–Y6, the thresholds Y7–Y13.
TEXT ·countGE7AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	MOVQ tm1+16(FP), AX
	VPBROADCASTD 0(AX), Y7
	VPBROADCASTD 4(AX), Y8
	VPBROADCASTD 8(AX), Y9
	VPBROADCASTD 12(AX), Y10
	VPBROADCASTD 16(AX), Y11
	VPBROADCASTD 20(AX), Y12
	VPBROADCASTD 24(AX), Y13
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6

c7loop:
	TESTQ CX, CX
	JZ    c7done
	VMOVDQU (SI), Y15
	VPSLLD  $1, Y15, Y15
	VPSRLD  $1, Y15, Y15
	C7(Y7, Y0)
	C7(Y8, Y1)
	C7(Y9, Y2)
	C7(Y10, Y3)
	C7(Y11, Y4)
	C7(Y12, Y5)
	C7(Y13, Y6)
	ADDQ $32, SI
	DECQ CX
	JMP  c7loop

c7done:
	MOVQ out+24(FP), DI
	VMOVDQA Y5, Y8 // SUMLANES clobbers Y5
	SUMLANES(Y0, X0, 0)
	SUMLANES(Y1, X1, 8)
	SUMLANES(Y2, X2, 16)
	SUMLANES(Y3, X3, 24)
	SUMLANES(Y4, X4, 32)
	SUMLANES(Y8, X8, 40)
	SUMLANES(Y6, X6, 48)
	VZEROUPPER
	RET
