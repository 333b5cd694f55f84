package tensor

import (
	"fmt"

	"gonum.org/v1/gonum/blas/blas32"
)

// Add adds src to dst element-wise, in place: dst += src.
//
// It is blas32.Axpy(1, src, dst) (SSE assembly on amd64); the result is bit
// for bit that of the plain loop, since 1·x is exact:
//
//	for i := range dst {
//		dst[i] += src[i]
//	}
//
// Add panics if the lengths differ.
func Add(dst, src []float32) {
	if len(dst) != len(src) {
		panic(fmt.Sprintf("tensor: Add: length mismatch: dst %d, src %d", len(dst), len(src)))
	}
	if len(dst) == 0 {
		return
	}
	blas32.Axpy(1,
		blas32.Vector{N: len(src), Inc: 1, Data: src},
		blas32.Vector{N: len(dst), Inc: 1, Data: dst})
}

// Scale multiplies every element of dst by alpha, in place.
//
// It is blas32.Scal (SSE assembly on amd64), equivalent to the plain loop
//
//	for i := range dst {
//		dst[i] *= alpha
//	}
//
// including for alpha == 0 (where BLAS would store zeros: here 0·NaN stays
// NaN and 0·-x is -0, as in the loop, which Scale then runs itself).
func Scale(dst []float32, alpha float32) {
	if len(dst) == 0 {
		return
	}
	if alpha == 0 {
		for i := range dst {
			dst[i] *= alpha
		}
		return
	}
	blas32.Scal(alpha, blas32.Vector{N: len(dst), Inc: 1, Data: dst})
}

// Copy copies src into dst and returns the number of elements copied, the
// minimum of the two lengths. It is the built-in copy (a memmove).
func Copy(dst, src []float32) int {
	return copy(dst, src)
}
