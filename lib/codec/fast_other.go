//go:build !amd64 || purego

package codec

const (
	haveAVX2 = false
	haveF16C = false
)

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
