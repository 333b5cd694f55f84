//go:build !amd64 || purego

package codec

const (
	haveAVX2 = false
	haveF16C = false
)

var haveAVX512 = false

func f16AVX(dst *byte, x *float32, n int) bool { panic("codec: no f16AVX on this platform") }

func signSumsAVX2(dst *byte, x *float32, n int) (bool, float64, float64) {
	panic("codec: no signSumsAVX2 on this platform")
}

func sumSquares8AVX2(x *float32, n int, out *[8]float64) {
	panic("codec: no sumSquares8AVX2 on this platform")
}

func qsgdAVX2(codes *byte, x *float32, n int, sc24 float32, maxT uint32, seed uint64) uint64 {
	panic("codec: no qsgdAVX2 on this platform")
}

func signBitsAVX2(dst *byte, x *float32, n int) bool {
	panic("codec: no signBitsAVX2 on this platform")
}

func qsgdAVX512(codes *byte, x *float32, n int, sc24 float32, maxT uint32, seed uint64, stream bool) uint64 {
	panic("codec: no qsgdAVX512 on this platform")
}

func bf16AVX2(dst *byte, x *float32, n int) bool { panic("codec: no bf16AVX2 on this platform") }

func qsgdDecodeAVX2(dst *float32, codes *byte, n int, u float32) {
	panic("codec: no qsgdDecodeAVX2 on this platform")
}

func ternAVX512(bits *byte, nb int, x *float32, n int, inv float64, base uint64) {
	panic("codec: no ternAVX512 on this platform")
}

func maxMagAVX2(x *float32, n int) uint32 { panic("codec: no maxMagAVX2 on this platform") }

func naturalAVX512(codes *byte, x *float32, n int, base uint64) bool {
	panic("codec: no naturalAVX512 on this platform")
}

func maxAbsI8AVX2(b *byte, n int) uint8 { panic("codec: no maxAbsI8AVX2 on this platform") }

func bf16DecodeAVX2(dst *float32, src *byte, n int) {
	panic("codec: no bf16DecodeAVX2 on this platform")
}

func ternDecodeAVX512(dst *float32, bits *byte, nb int, n int, s float32) {
	panic("codec: no ternDecodeAVX512 on this platform")
}

func ternAVX2(bits *byte, nb int, x *float32, n int, inv float64, base uint64) {
	panic("codec: no ternAVX2 on this platform")
}

func naturalAVX2(codes *byte, x *float32, n int, base uint64) bool {
	panic("codec: no naturalAVX2 on this platform")
}

func f16AVXNT(dst *byte, x *float32, n int) bool { panic("codec: no f16AVXNT on this platform") }

func bf16AVX2NT(dst *byte, x *float32, n int) bool { panic("codec: no bf16AVX2NT on this platform") }

func f16DecodeAVX(dst *float32, src *byte, n int) { panic("codec: no f16DecodeAVX on this platform") }

func naturalDecodeAVX2(dst *float32, src *byte, n int) {
	panic("codec: no naturalDecodeAVX2 on this platform")
}

func geMaskAVX2(x *float32, n int, tm1 int32, dst *uint32) {
	panic("codec: no geMaskAVX2 on this platform")
}

func countGE3AVX2(x *float32, n int, tm1 *[3]int32, out *[3]int) {
	panic("codec: no countGE3AVX2 on this platform")
}

func ternDecodeAVX2(dst *float32, bits *byte, nb int, n int, s float32) {
	panic("codec: no ternDecodeAVX2 on this platform")
}

func signumAVX2(dst *byte, m *float32, x *float32, n int, b, a float32) {
	panic("codec: no signumAVX2 on this platform")
}

func countGE7AVX2(x *float32, n int, tm1 *[7]int32, out *[7]int) {
	panic("codec: no countGE7AVX2 on this platform")
}

func outer4AVX2(row *float32, q *float32, n int, p *[4]float32) {
	panic("codec: no outer4AVX2 on this platform")
}

func axpy4AVX2(q *float64, row *float32, n int, p *[4]float64) {
	panic("codec: no axpy4AVX2 on this platform")
}

func dot4x4AVX2(x *float32, m int, q *float32, out *[16]float64) {
	panic("codec: no dot4x4AVX2 on this platform")
}
