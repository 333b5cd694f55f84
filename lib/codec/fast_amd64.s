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
	VCVTPS2PD (SI), Y0
	VCVTPS2PD (SI)(DX*1), Y1
	VCVTPS2PD (SI)(DX*2), Y2
	VCVTPS2PD (SI)(R9*1), Y3
	VCVTPS2PD (R8), Y4
	VCVTPS2PD (R8)(DX*1), Y5
	VCVTPS2PD (R8)(DX*2), Y6
	VCVTPS2PD (R8)(R9*1), Y7
	VMULPD Y0, Y0, Y0
	VMULPD Y1, Y1, Y1
	VMULPD Y2, Y2, Y2
	VMULPD Y3, Y3, Y3
	VMULPD Y4, Y4, Y4
	VMULPD Y5, Y5, Y5
	VMULPD Y6, Y6, Y6
	VMULPD Y7, Y7, Y7
	VPERM2F128 $0x20, Y1, Y0, Y8
	VPERM2F128 $0x31, Y1, Y0, Y0
	VPERM2F128 $0x20, Y3, Y2, Y9
	VPERM2F128 $0x31, Y3, Y2, Y2
	VPERM2F128 $0x20, Y5, Y4, Y10
	VPERM2F128 $0x31, Y5, Y4, Y4
	VPERM2F128 $0x20, Y7, Y6, Y11
	VPERM2F128 $0x31, Y7, Y6, Y6
	VADDPD Y8, Y12, Y12
	VADDPD Y9, Y13, Y13
	VADDPD Y10, Y14, Y14
	VADDPD Y11, Y15, Y15
	VADDPD Y0, Y12, Y12
	VADDPD Y2, Y13, Y13
	VADDPD Y4, Y14, Y14
	VADDPD Y6, Y15, Y15
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

// func qsgdAVX2(codes *byte, x *float32, n int, sc24 float32, maxT uint32, seed uint64) (state uint64)
// qsgdBlockGo on n elements (n a multiple of 16) with sc24 finite;
// returns the wyrand state after the n/2 draws. Of the 8 draws of an
// iteration, draws 1–4 run in the lanes of Y8 (the 64×64→128 product
// from four 32×32→64 VPMULUDQs) and draws 5–8 on the scalar MULQ, so
// that both kinds of units work.
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
	MOVL $0x00ffffff, AX
	MOVD AX, X13
	VPBROADCASTD X13, Y13 // 24-bit mask (dwords)
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
	VPSRLQ   $32, Y1, Y3 // bH
	VPMULUDQ Y1, Y8, Y4  // ll
	VPMULUDQ Y3, Y8, Y5  // lh = aL·bH
	VPMULUDQ Y1, Y2, Y6  // hl = aH·bL
	VPMULUDQ Y3, Y2, Y7  // hh
	VPADDQ   Y9, Y8, Y8
	VPSRLQ   $32, Y4, Y0
	VPAND    Y14, Y5, Y1
	VPADDQ   Y1, Y0, Y0
	VPAND    Y14, Y6, Y1
	VPADDQ   Y1, Y0, Y0  // mid = ll>>32 + lh&M + hl&M
	VPSRLQ   $32, Y5, Y5
	VPADDQ   Y5, Y7, Y7
	VPSRLQ   $32, Y6, Y6
	VPADDQ   Y6, Y7, Y7
	VPSRLQ   $32, Y0, Y1
	VPADDQ   Y1, Y7, Y7  // hi
	VPSLLQ   $32, Y0, Y0
	VPAND    Y14, Y4, Y4
	VPOR     Y4, Y0, Y0  // lo
	VPXOR    Y7, Y0, Y4  // r
	// u: element 2i gets r_i>>40, element 2i+1 gets (r_i>>16)&0xffffff.
	VPSRLQ $40, Y4, Y5
	VPSRLQ $16, Y4, Y6
	VPAND  Y13, Y6, Y6
	VPSLLQ $32, Y6, Y6
	VPOR   Y6, Y5, Y4
	// Draws 5–8 on the scalar unit.
	ADDQ R9, R10
	MOVQ R10, AX
	MOVQ R10, BX
	XORQ R11, BX
	MULQ BX
	XORQ DX, AX
	VMOVQ AX, X7
	ADDQ R9, R10
	MOVQ R10, AX
	MOVQ R10, BX
	XORQ R11, BX
	MULQ BX
	XORQ DX, AX
	VPINSRQ $1, AX, X7, X7
	ADDQ R9, R10
	MOVQ R10, AX
	MOVQ R10, BX
	XORQ R11, BX
	MULQ BX
	XORQ DX, AX
	VMOVQ AX, X5
	ADDQ R9, R10
	MOVQ R10, AX
	MOVQ R10, BX
	XORQ R11, BX
	MULQ BX
	XORQ DX, AX
	VPINSRQ $1, AX, X5, X5
	ADDQ R12, R10
	VINSERTI128 $1, X5, Y7, Y7
	VPSRLQ $40, Y7, Y5
	VPSRLQ $16, Y7, Y6
	VPAND  Y13, Y6, Y6
	VPSLLQ $32, Y6, Y6
	VPOR   Y6, Y5, Y7

	VMOVDQU    0(SI), Y0
	VPAND      Y12, Y0, Y1
	VMULPS     Y10, Y1, Y1
	VCVTTPS2DQ Y1, Y1
	VPMINUD    Y11, Y1, Y1 // t
	VPSRLD     $24, Y1, Y2 // t>>24
	VPAND      Y13, Y1, Y3 // t & 0xffffff
	VPSUBD     Y3, Y4, Y3  // u - frac
	VPSRLD     $31, Y3, Y3
	VPADDD     Y3, Y2, Y2  // l
	VPSIGND    Y0, Y2, Y4 // −l where x has its sign bit set (l is 0 for ±0)
	VMOVDQU    32(SI), Y0
	VPAND      Y12, Y0, Y1
	VMULPS     Y10, Y1, Y1
	VCVTTPS2DQ Y1, Y1
	VPMINUD    Y11, Y1, Y1 // t
	VPSRLD     $24, Y1, Y2 // t>>24
	VPAND      Y13, Y1, Y3 // t & 0xffffff
	VPSUBD     Y3, Y7, Y3  // u - frac
	VPSRLD     $31, Y3, Y3
	VPADDD     Y3, Y2, Y2  // l
	VPSIGND    Y0, Y2, Y7 // −l where x has its sign bit set (l is 0 for ±0)
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
