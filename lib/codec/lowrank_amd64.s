//go:build amd64 && !purego

#include "textflag.h"

// outer4AVX2's output order: the sums come out as [0 2 4 6 | 1 3 5 7].
DATA o4perm<>+0(SB)/4, $0
DATA o4perm<>+4(SB)/4, $4
DATA o4perm<>+8(SB)/4, $1
DATA o4perm<>+12(SB)/4, $5
DATA o4perm<>+16(SB)/4, $2
DATA o4perm<>+20(SB)/4, $6
DATA o4perm<>+24(SB)/4, $3
DATA o4perm<>+28(SB)/4, $7
GLOBL o4perm<>(SB), RODATA|NOPTR, $32

// func outer4AVX2(row *float32, q *float32, n int, p *[4]float32)
// outer4Go for n a multiple of 8: eight rows of q (32 floats) transposed
// in registers into q's four columns, then s = +0 + p0·q0, s += p1·q1,
// s += p2·q2, s += p3·q3, each product and sum rounded to float32 as the
// plain loop rounds them.
TEXT ·outer4AVX2(SB), NOSPLIT, $0-32
	MOVQ row+0(FP), DI
	MOVQ q+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ p+24(FP), AX
	VBROADCASTSS 0(AX), Y8
	VBROADCASTSS 4(AX), Y9
	VBROADCASTSS 8(AX), Y10
	VBROADCASTSS 12(AX), Y11
	VMOVDQU o4perm<>(SB), Y12
	VXORPS  Y13, Y13, Y13
	SHRQ    $3, CX

o4loop:
	TESTQ CX, CX
	JZ    o4done
	VMOVUPS   0(SI), Y0  // rows 0, 1
	VMOVUPS   32(SI), Y1 // rows 2, 3
	VMOVUPS   64(SI), Y2 // rows 4, 5
	VMOVUPS   96(SI), Y3 // rows 6, 7
	VUNPCKLPS Y1, Y0, Y4
	VUNPCKHPS Y1, Y0, Y5
	VUNPCKLPS Y3, Y2, Y6
	VUNPCKHPS Y3, Y2, Y7
	VUNPCKLPD Y6, Y4, Y0 // column 0 of rows [0 2 4 6 | 1 3 5 7]
	VUNPCKHPD Y6, Y4, Y1 // column 1
	VUNPCKLPD Y7, Y5, Y2 // column 2
	VUNPCKHPD Y7, Y5, Y3 // column 3
	VMULPS    Y0, Y8, Y0
	VADDPS    Y0, Y13, Y4
	VMULPS    Y1, Y9, Y1
	VADDPS    Y1, Y4, Y4
	VMULPS    Y2, Y10, Y2
	VADDPS    Y2, Y4, Y4
	VMULPS    Y3, Y11, Y3
	VADDPS    Y3, Y4, Y4
	VPERMPS   Y4, Y12, Y4
	VMOVUPS   Y4, 0(DI)
	ADDQ      $128, SI
	ADDQ      $32, DI
	DECQ      CX
	JMP       o4loop

o4done:
	VZEROUPPER
	RET

// func axpy4AVX2(q *float64, row *float32, n int, p *[4]float64)
// axpy4Go: q[4j:4j+4] += float64(row[j])·p for the n elements of row,
// an element of 0 (or −0) adding nothing; each product and sum rounded
// to float64 as the plain loop rounds them, q's value first.
TEXT ·axpy4AVX2(SB), NOSPLIT, $0-32
	MOVQ    q+0(FP), DI
	MOVQ    row+8(FP), SI
	MOVQ    n+16(FP), CX
	MOVQ    p+24(FP), AX
	VMOVUPD 0(AX), Y8
	VXORPD  Y9, Y9, Y9

a4loop:
	TESTQ        CX, CX
	JZ           a4done
	VBROADCASTSS 0(SI), X0
	VCVTPS2PD    X0, Y0
	VMULPD       Y8, Y0, Y1 // v·p
	VCMPPD       $0, Y9, Y0, Y2
	VANDNPD      Y1, Y2, Y1 // nothing where v == 0
	VMOVUPD      0(DI), Y3
	VADDPD       Y1, Y3, Y3
	VMOVUPD      Y3, 0(DI)
	ADDQ         $4, SI
	ADDQ         $32, DI
	DECQ         CX
	JMP          a4loop

a4done:
	VZEROUPPER
	RET

// DOT4ROW adds float64(v)·q (Y8) to the accumulator ACC for v the float
// at OFF(ROW), unless v is 0 (or −0); clobbers Y0–Y2.
#define DOT4ROW(ROW, ACC) \
	VBROADCASTSS (ROW)(AX*1), X0; \
	VCVTPS2PD    X0, Y0; \
	VMULPD       Y8, Y0, Y1; \
	VCMPPD       $0, Y9, Y0, Y2; \
	VANDNPD      Y1, Y2, Y1; \
	VADDPD       Y1, ACC, ACC

// func dot4x4AVX2(x *float32, m int, q *float32, out *[16]float64)
// dot4Go on four rows at once (x, x+m, x+2m, x+3m, each of m floats):
// out[4k+t] = Σ_j float64(row_k[j])·float64(q[4j+t]), j ascending, an
// element of 0 adding nothing, each product and sum rounded as the plain
// loop rounds them; four rows make four independent chains of additions
// where one row's is a single chain.
TEXT ·dot4x4AVX2(SB), NOSPLIT, $0-32
	MOVQ   x+0(FP), SI
	MOVQ   m+8(FP), CX
	MOVQ   q+16(FP), DX
	MOVQ   out+24(FP), DI
	LEAQ   (SI)(CX*4), R8
	LEAQ   (R8)(CX*4), R9
	LEAQ   (R9)(CX*4), R10
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	VXORPD Y9, Y9, Y9
	XORQ   AX, AX

d4loop:
	TESTQ     CX, CX
	JZ        d4done
	VCVTPS2PD (DX), Y8
	DOT4ROW(SI, Y4)
	DOT4ROW(R8, Y5)
	DOT4ROW(R9, Y6)
	DOT4ROW(R10, Y7)
	ADDQ      $4, AX
	ADDQ      $16, DX
	DECQ      CX
	JMP       d4loop

d4done:
	VMOVUPD Y4, 0(DI)
	VMOVUPD Y5, 32(DI)
	VMOVUPD Y6, 64(DI)
	VMOVUPD Y7, 96(DI)
	VZEROUPPER
	RET
