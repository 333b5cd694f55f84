//go:build amd64 && !purego

#include "textflag.h"

// (j+1)·C1 for j = 0..15, C1 = 0xa0761d6478bd642f (wyrand's increment):
// the offsets of the 16 draws of one qsgdAVX512 iteration from its state.
DATA wyoff<>+0(SB)/8, $0xa0761d6478bd642f
DATA wyoff<>+8(SB)/8, $0x40ec3ac8f17ac85e
DATA wyoff<>+16(SB)/8, $0xe162582d6a382c8d
DATA wyoff<>+24(SB)/8, $0x81d87591e2f590bc
DATA wyoff<>+32(SB)/8, $0x224e92f65bb2f4eb
DATA wyoff<>+40(SB)/8, $0xc2c4b05ad470591a
DATA wyoff<>+48(SB)/8, $0x633acdbf4d2dbd49
DATA wyoff<>+56(SB)/8, $0x03b0eb23c5eb2178
DATA wyoff<>+64(SB)/8, $0xa42708883ea885a7
DATA wyoff<>+72(SB)/8, $0x449d25ecb765e9d6
DATA wyoff<>+80(SB)/8, $0xe513435130234e05
DATA wyoff<>+88(SB)/8, $0x858960b5a8e0b234
DATA wyoff<>+96(SB)/8, $0x25ff7e1a219e1663
DATA wyoff<>+104(SB)/8, $0xc6759b7e9a5b7a92
DATA wyoff<>+112(SB)/8, $0x66ebb8e31318dec1
DATA wyoff<>+120(SB)/8, $0x0761d6478bd642f0
GLOBL wyoff<>(SB), RODATA|NOPTR, $128

// VPSHUFB indices that make u' of r': dword 2j = bytes 5 6 7 of qword j
// (r>>40), dword 2j+1 = bytes 2 3 4 ((r>>16) & 0xffffff).
DATA ushuf<>+0(SB)/8, $0x8004030280070605
DATA ushuf<>+8(SB)/8, $0x800c0b0a800f0e0d
DATA ushuf<>+16(SB)/8, $0x8004030280070605
DATA ushuf<>+24(SB)/8, $0x800c0b0a800f0e0d
DATA ushuf<>+32(SB)/8, $0x8004030280070605
DATA ushuf<>+40(SB)/8, $0x800c0b0a800f0e0d
DATA ushuf<>+48(SB)/8, $0x8004030280070605
DATA ushuf<>+56(SB)/8, $0x800c0b0a800f0e0d
GLOBL ushuf<>(SB), RODATA|NOPTR, $64

// WYDRAW8 turns the eight wyrand states in S into u' = 0xffffff − u for
// the 16 elements they serve (dword 2j: ¬r_j>>40, dword 2j+1: (¬r_j>>16) &
// 0xffffff, r_j = hi ^ lo of S_j·(S_j ^ C2)) in U, and advances S by INC.
// Clobbers Z1–Z7.
#define WYDRAW8(S, U, INC) \
	VPXORQ     Z19, S, Z1; \
	VPSRLQ     $32, S, Z2; \
	VPXORQ     Z26, Z2, Z3; \
	VPMULUDQ   Z1, S, Z4; \
	VPMULUDQ   Z3, S, Z5; \
	VPMULUDQ   Z1, Z2, Z6; \
	VPMULUDQ   Z3, Z2, Z7; \
	VPMULLQ    Z1, S, U; \
	VPADDQ     INC, S, S; \
	VPSRLQ     $32, Z4, Z4; \
	VPADDQ     Z4, Z6, Z6; \
	VPANDQ     Z21, Z6, Z4; \
	VPADDQ     Z4, Z5, Z5; \
	VPSRLQ     $32, Z6, Z6; \
	VPADDQ     Z6, Z7, Z7; \
	VPSRLQ     $32, Z5, Z5; \
	VPADDQ     Z5, Z7, Z7; \
	VPTERNLOGQ $0xa5, Z7, U, U; \
	VPSHUFB    Z22, U, U

// QUANT16 quantises the 16 floats at XOFF(SI) with the uniforms U into 16
// int8 codes in XO: t = min(cvtt(|x|·sc24), maxT), l = (t + u')>>24
// (= t>>24 + [u < t&0xffffff]), negated where x has its sign bit set.
// Clobbers Z1, Z2, K1.
#define QUANT16(XOFF, U, XO) \
	VMOVDQU32  XOFF(SI), Z1; \
	VPANDD     Z18, Z1, Z2; \
	VMULPS     Z16, Z2, Z2; \
	VCVTTPS2DQ Z2, Z2; \
	VPMINUD    Z17, Z2, Z2; \
	VPADDD     U, Z2, Z2; \
	VPSRLD     $24, Z2, Z2; \
	VPMOVD2M   Z1, K1; \
	VPSUBD     Z2, Z23, K1, Z2; \
	VPMOVDB    Z2, XO

// SDRAW5 makes one wyrand draw on the scalar unit (state R10, advanced
// by R9 = C1 first; R11 = C2) and leaves ¬r in AX.
#define SDRAW5 \
	ADDQ R9, R10; \
	MOVQ R10, AX; \
	MOVQ R10, BX; \
	XORQ R11, BX; \
	MULQ BX; \
	XORQ DX, AX; \
	NOTQ AX

// QSGD32 makes the 32 codes of one iteration in Y10: draws 0–7 in the
// lanes of Z24, draws 8–15 on the scalar unit (MULQ), so that both kinds
// of units work.
#define QSGD32 \
	PREFETCHT0 1024(SI); \
	WYDRAW8(Z24, Z8, Z20); \
	PREFETCHT0 1088(SI); \
	SDRAW5; \
	VMOVQ AX, X9; \
	SDRAW5; \
	VPINSRQ $1, AX, X9, X9; \
	SDRAW5; \
	VMOVQ AX, X3; \
	SDRAW5; \
	VPINSRQ $1, AX, X3, X3; \
	VINSERTI128 $1, X3, Y9, Y9; \
	QUANT16(0, Z8, X10); \
	SDRAW5; \
	VMOVQ AX, X12; \
	SDRAW5; \
	VPINSRQ $1, AX, X12, X12; \
	SDRAW5; \
	VMOVQ AX, X3; \
	SDRAW5; \
	VPINSRQ $1, AX, X3, X3; \
	VINSERTI128 $1, X3, Y12, Y12; \
	ADDQ R12, R10; \
	VINSERTI64X4 $1, Y12, Z9, Z9; \
	VPSHUFB Z22, Z9, Z9; \
	QUANT16(64, Z9, X11); \
	VINSERTI128 $1, X11, Y10, Y10

// func qsgdAVX512(codes *byte, x *float32, n int, sc24 float32, maxT uint32, seed uint64, stream bool) (state uint64)
// qsgdBlockGo on n elements (n a multiple of 32) with sc24 finite and
// maxT ≤ 127·2^24; returns the wyrand state after the n/2 draws. One
// iteration: 16 draws in two vectors of eight (VPMULLQ for the low half
// of each 64×64 product, four VPMULUDQs for the high half), 32 codes.
// With stream (codes 64-byte aligned) the codes go out with
// non-temporal stores of whole cache lines.
TEXT ·qsgdAVX512(SB), NOSPLIT, $0-56
	MOVQ codes+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	VBROADCASTSS sc24+24(FP), Z16
	MOVL maxT+28(FP), AX
	VPBROADCASTD AX, Z17
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z18
	MOVQ $0xe7037ed1a0b428db, R11
	VPBROADCASTQ R11, Z19
	MOVQ $0x0761d6478bd642f0, AX // 16·C1
	VPBROADCASTQ AX, Z20
	MOVQ $0x00000000ffffffff, AX
	VPBROADCASTQ AX, Z21
	VMOVDQU64 ushuf<>(SB), Z22
	MOVQ $0xe7037ed1, AX // C2 >> 32
	VPBROADCASTQ AX, Z26
	VPXORD Z23, Z23, Z23
	MOVQ seed+32(FP), AX
	VPBROADCASTQ AX, Z24
	VPADDQ wyoff<>+0(SB), Z24, Z24
	MOVQ $0xa0761d6478bd642f, R9
	MOVQ $0x03b0eb23c5eb2178, R12 // 8·C1
	MOVQ seed+32(FP), R10
	ADDQ R12, R10
	// the state after n/2 draws
	MOVQ n+16(FP), AX
	SHRQ $1, AX
	IMULQ R9, AX
	ADDQ seed+32(FP), AX
	MOVQ AX, state+48(FP)
	CMPB stream+40(FP), $0
	JNE  q5nt

q5loop:
	TESTQ CX, CX
	JZ    q5done
	QSGD32
	VMOVDQU Y10, 0(DI)
	ADDQ $128, SI
	ADDQ $32, DI
	DECQ CX
	JMP  q5loop

	// Non-temporal: two iterations make one whole 64-byte line of codes.
q5nt:
	CMPQ CX, $2
	JB   q5nttail
	QSGD32
	VMOVDQA64 Z10, Z13
	ADDQ $128, SI
	QSGD32
	VINSERTI64X4 $1, Y10, Z13, Z13
	VMOVNTDQ Z13, 0(DI)
	ADDQ $128, SI
	ADDQ $64, DI
	SUBQ $2, CX
	JMP  q5nt

q5nttail:
	TESTQ CX, CX
	JZ    q5ntdone
	QSGD32
	VMOVDQU Y10, 0(DI)

q5ntdone:
	SFENCE

q5done:
	VZEROUPPER
	RET

// ---- terngrad ----

// (e+1)·Golden for the element e that lane q of the two draw vectors
// serves: lanes run 7..0 and 15..8, so that mask bit b of a byte is
// element 7 − b (MSB first).
DATA ternoff<>+0(SB)/8, $0xf1bbcdcbfa53e0a8
DATA ternoff<>+8(SB)/8, $0x538454127b096493
DATA ternoff<>+16(SB)/8, $0xb54cda58fbbee87e
DATA ternoff<>+24(SB)/8, $0x1715609f7c746c69
DATA ternoff<>+32(SB)/8, $0x78dde6e5fd29f054
DATA ternoff<>+40(SB)/8, $0xdaa66d2c7ddf743f
DATA ternoff<>+48(SB)/8, $0x3c6ef372fe94f82a
DATA ternoff<>+56(SB)/8, $0x9e3779b97f4a7c15
DATA ternoff<>+64(SB)/8, $0xe3779b97f4a7c150
DATA ternoff<>+72(SB)/8, $0x454021de755d453b
DATA ternoff<>+80(SB)/8, $0xa708a824f612c926
DATA ternoff<>+88(SB)/8, $0x08d12e6b76c84d11
DATA ternoff<>+96(SB)/8, $0x6a99b4b1f77dd0fc
DATA ternoff<>+104(SB)/8, $0xcc623af8783354e7
DATA ternoff<>+112(SB)/8, $0x2e2ac13ef8e8d8d2
DATA ternoff<>+120(SB)/8, $0x8ff34785799e5cbd
GLOBL ternoff<>(SB), RODATA|NOPTR, $128

// Dword indices: rev8 reverses each group of 8 lanes; hidw gathers the
// high dwords of two qword vectors.
DATA rev8<>+0(SB)/8, $0x0000000600000007
DATA rev8<>+8(SB)/8, $0x0000000400000005
DATA rev8<>+16(SB)/8, $0x0000000200000003
DATA rev8<>+24(SB)/8, $0x0000000000000001
DATA rev8<>+32(SB)/8, $0x0000000e0000000f
DATA rev8<>+40(SB)/8, $0x0000000c0000000d
DATA rev8<>+48(SB)/8, $0x0000000a0000000b
DATA rev8<>+56(SB)/8, $0x0000000800000009
GLOBL rev8<>(SB), RODATA|NOPTR, $64
DATA hidw<>+0(SB)/8, $0x0000000300000001
DATA hidw<>+8(SB)/8, $0x0000000700000005
DATA hidw<>+16(SB)/8, $0x0000000b00000009
DATA hidw<>+24(SB)/8, $0x0000000f0000000d
DATA hidw<>+32(SB)/8, $0x0000001300000011
DATA hidw<>+40(SB)/8, $0x0000001700000015
DATA hidw<>+48(SB)/8, $0x0000001b00000019
DATA hidw<>+56(SB)/8, $0x0000001f0000001d
GLOBL hidw<>(SB), RODATA|NOPTR, $64

// func ternAVX512(bits *byte, nb int, x *float32, n int, inv float64, base uint64)
// TernGrad's draws for n elements (n a multiple of 16) starting at element
// i0 (a multiple of 8): element i is sent when Unit24(Mix64(key +
// (i+1)·Golden)) < float32(|x_i|·inv), as sign bit plane 1 (x > 0) at
// bits[(i−i0)/8] or plane 2 at bits[nb + (i−i0)/8]; base = key + i0·Golden.
// Whole bytes are stored. Only bits 40–63 of a draw are used, and the
// last xor-shift of Mix64 does not change them, so it is left out.
TEXT ·ternAVX512(SB), NOSPLIT, $0-48
	MOVQ bits+0(FP), DI
	MOVQ nb+8(FP), R8
	ADDQ DI, R8
	MOVQ x+16(FP), SI
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	VBROADCASTSD inv+32(FP), Z16
	MOVQ base+40(FP), AX
	VPBROADCASTQ AX, Z24
	VPADDQ ternoff<>+64(SB), Z24, Z25
	VPADDQ ternoff<>+0(SB), Z24, Z24
	MOVQ $0xe3779b97f4a7c150, AX // 16·Golden
	VPBROADCASTQ AX, Z20
	MOVQ $0xbf58476d1ce4e5b9, AX
	VPBROADCASTQ AX, Z21
	MOVQ $0x94d049bb133111eb, AX
	VPBROADCASTQ AX, Z22
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z18
	MOVL $0x33800000, AX // 2^-24
	VPBROADCASTD AX, Z19
	VMOVDQU32 rev8<>(SB), Z26
	VMOVDQU32 hidw<>(SB), Z27

ternloop:
	TESTQ CX, CX
	JZ    terndone
	// z = Mix64 of the counters without its last xor-shift.
	VPSRLQ  $30, Z24, Z0
	VPSRLQ  $30, Z25, Z1
	VPXORQ  Z24, Z0, Z0
	VPXORQ  Z25, Z1, Z1
	VPMULLQ Z21, Z0, Z0
	VPMULLQ Z21, Z1, Z1
	VPADDQ  Z20, Z24, Z24
	VPADDQ  Z20, Z25, Z25
	VPSRLQ  $27, Z0, Z2
	VPSRLQ  $27, Z1, Z3
	VPXORQ  Z2, Z0, Z0
	VPXORQ  Z3, Z1, Z1
	VPMULLQ Z22, Z0, Z0
	VPMULLQ Z22, Z1, Z1
	// u = float32(z>>40)·2^-24 in dword lanes 0..15
	VPERMT2D Z1, Z27, Z0
	VPSRLD    $8, Z0, Z0
	VCVTDQ2PS Z0, Z0
	VMULPS    Z19, Z0, Z0
	// p = float32(float64(|x|)·inv), lanes reversed by eight
	VPERMD      (SI), Z26, Z4
	VPANDD      Z18, Z4, Z5
	VCVTPS2PD   Y5, Z6
	VEXTRACTF32X8 $1, Z5, Y7
	VCVTPS2PD   Y7, Z7
	VMULPD      Z16, Z6, Z6
	VMULPD      Z16, Z7, Z7
	VCVTPD2PS   Z6, Y6
	VCVTPD2PS   Z7, Y7
	VINSERTF32X8 $1, Y7, Z6, Z6
	VCMPPS      $1, Z6, Z0, K1 // u < p
	VPMOVD2M    Z4, K2         // sign
	KANDNW      K1, K2, K3     // sent and positive
	KANDW       K1, K2, K4     // sent and negative
	KMOVW       K3, (DI)
	KMOVW       K4, (R8)
	ADDQ $64, SI
	ADDQ $2, DI
	ADDQ $2, R8
	DECQ CX
	JMP  ternloop

terndone:
	VZEROUPPER
	RET

// ---- natural ----

// (e+1)·Golden for lane e = 0..15 of the two draw vectors.
DATA natoff<>+0(SB)/8, $0x9e3779b97f4a7c15
DATA natoff<>+8(SB)/8, $0x3c6ef372fe94f82a
DATA natoff<>+16(SB)/8, $0xdaa66d2c7ddf743f
DATA natoff<>+24(SB)/8, $0x78dde6e5fd29f054
DATA natoff<>+32(SB)/8, $0x1715609f7c746c69
DATA natoff<>+40(SB)/8, $0xb54cda58fbbee87e
DATA natoff<>+48(SB)/8, $0x538454127b096493
DATA natoff<>+56(SB)/8, $0xf1bbcdcbfa53e0a8
DATA natoff<>+64(SB)/8, $0x8ff34785799e5cbd
DATA natoff<>+72(SB)/8, $0x2e2ac13ef8e8d8d2
DATA natoff<>+80(SB)/8, $0xcc623af8783354e7
DATA natoff<>+88(SB)/8, $0x6a99b4b1f77dd0fc
DATA natoff<>+96(SB)/8, $0x08d12e6b76c84d11
DATA natoff<>+104(SB)/8, $0xa708a824f612c926
DATA natoff<>+112(SB)/8, $0x454021de755d453b
DATA natoff<>+120(SB)/8, $0xe3779b97f4a7c150
GLOBL natoff<>(SB), RODATA|NOPTR, $128

// func naturalAVX512(codes *byte, x *float32, n int, base uint64) (bad bool)
// naturalCode for n elements (n a multiple of 16) from element i0, base =
// key + i0·Golden, with r = Mix64 of the counter minus its last
// xor-shift (which leaves bits 40–63, the only ones used, unchanged). With
// e the exponent field and m the mantissa of |x|: e ≥ 28 gives
// min(e − 27 + [r>>41 < m], 127); e < 28 (below 2^-99, zero included)
// gives [float32(r>>40) < |x|·2^123] (both exact); the sign goes to bit 7
// of a non-zero code. bad reports a NaN or ±Inf (exponent field 255).
TEXT ·naturalAVX512(SB), NOSPLIT, $0-33
	MOVQ codes+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	MOVQ base+24(FP), AX
	VPBROADCASTQ AX, Z24
	VPADDQ natoff<>+64(SB), Z24, Z25
	VPADDQ natoff<>+0(SB), Z24, Z24
	MOVQ $0xe3779b97f4a7c150, AX // 16·Golden
	VPBROADCASTQ AX, Z20
	MOVQ $0xbf58476d1ce4e5b9, AX
	VPBROADCASTQ AX, Z21
	MOVQ $0x94d049bb133111eb, AX
	VPBROADCASTQ AX, Z22
	VMOVDQU32 hidw<>(SB), Z27
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z18
	MOVL $0x007fffff, AX
	VPBROADCASTD AX, Z17
	MOVL $27, AX
	VPBROADCASTD AX, Z16
	MOVL $28, AX
	VPBROADCASTD AX, Z15
	MOVL $127, AX
	VPBROADCASTD AX, Z14
	MOVL $1, AX
	VPBROADCASTD AX, Z13
	MOVL $0x80, AX
	VPBROADCASTD AX, Z12
	MOVL $0x7d000000, AX // 2^123
	VPBROADCASTD AX, Z11
	VPXORD Z23, Z23, Z23 // largest magnitude seen

natloop:
	TESTQ CX, CX
	JZ    natdone
	VPSRLQ  $30, Z24, Z0
	VPSRLQ  $30, Z25, Z1
	VPXORQ  Z24, Z0, Z0
	VPXORQ  Z25, Z1, Z1
	VPMULLQ Z21, Z0, Z0
	VPMULLQ Z21, Z1, Z1
	VPADDQ  Z20, Z24, Z24
	VPADDQ  Z20, Z25, Z25
	VPSRLQ  $27, Z0, Z2
	VPSRLQ  $27, Z1, Z3
	VPXORQ  Z2, Z0, Z0
	VPXORQ  Z3, Z1, Z1
	VPMULLQ Z22, Z0, Z0
	VPMULLQ Z22, Z1, Z1
	VPERMT2D Z1, Z27, Z0 // r>>32 of elements 0..15
	VPSRLD  $9, Z0, Z1   // 23-bit uniform
	VPSRLD  $8, Z0, Z0   // 24-bit uniform
	VMOVDQU32 (SI), Z4
	VPANDD  Z18, Z4, Z5  // |x|
	VPMAXUD Z5, Z23, Z23
	VPSRLD  $23, Z5, Z6  // e
	VPANDD  Z17, Z5, Z7  // m
	// e ≥ 28: min(e − 27 + [u23 < m], 127)
	VPSUBD  Z16, Z6, Z8
	VPCMPUD $1, Z7, Z1, K1
	VPADDD  Z13, Z8, K1, Z8
	VPMINUD Z14, Z8, Z8
	// e < 28: [u24 < |x|·2^123]
	VCVTDQ2PS Z0, Z0
	VMULPS    Z11, Z5, Z9
	VCMPPS    $1, Z9, Z0, K2
	VPCMPUD   $1, Z15, Z6, K3 // e < 28
	VMOVDQA32.Z Z13, K2, Z10 // [u24 < p]
	VPBLENDMD Z10, Z8, K3, Z8 // small: 0 or 1
	// sign on non-zero codes
	VPMOVD2M  Z4, K5
	VPTESTMD  Z8, Z8, K6
	KANDW     K5, K6, K5
	VPORD     Z12, Z8, K5, Z8
	VPMOVDB   Z8, (DI)
	ADDQ $64, SI
	ADDQ $16, DI
	DECQ CX
	JMP  natloop

natdone:
	MOVL $0x7f800000, AX
	VPBROADCASTD AX, Z1
	VPCMPUD $5, Z1, Z23, K1 // ≥ +Inf's key
	KORTESTW K1, K1
	SETNE bad+32(FP)
	VZEROUPPER
	RET

// func ternDecodeAVX512(dst *float32, bits *byte, nb int, n int, s float32)
// TernGrad's decoder for n elements (n a multiple of 16) from a byte
// boundary: plane 1 (bits) → s, else plane 2 (bits[nb:]) → −s, else 0.
// The mask bits are MSB first, so the lanes come out reversed by eight
// and VPERMD puts them back.
TEXT ·ternDecodeAVX512(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ bits+8(FP), SI
	MOVQ nb+16(FP), R8
	ADDQ SI, R8
	MOVQ n+24(FP), CX
	SHRQ $4, CX
	VBROADCASTSS s+32(FP), Z16
	MOVL $0x80000000, AX
	VPBROADCASTD AX, Z17
	VPXORD Z16, Z17, Z17 // −s (the sign bit flipped, as Go's -s)
	VMOVDQU32 rev8<>(SB), Z26

tdloop:
	TESTQ CX, CX
	JZ    tddone
	KMOVW (SI), K1
	KMOVW (R8), K2
	VMOVAPS.Z Z17, K2, Z0
	VMOVAPS   Z16, K1, Z0
	VPERMD    Z0, Z26, Z0
	VMOVUPS   Z0, (DI)
	ADDQ $2, SI
	ADDQ $2, R8
	ADDQ $64, DI
	DECQ CX
	JMP  tdloop

tddone:
	VZEROUPPER
	RET
