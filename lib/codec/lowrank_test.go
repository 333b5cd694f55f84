package codec

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/tensor"
)

// The plain loops the products replaced: the reference of their bits.

func mulMQGo(x, q []float32, n, m, r int) []float64 {
	p := make([]float64, n*r)
	for i := 0; i < n; i++ {
		for j, v := range x[i*m : (i+1)*m] {
			if v == 0 {
				continue
			}
			for t := 0; t < r; t++ {
				p[i*r+t] += float64(v) * float64(q[j*r+t])
			}
		}
	}
	return p
}

func mulMtPGo(x, p []float32, n, m, r int) []float64 {
	q := make([]float64, m*r)
	for i := 0; i < n; i++ {
		for j, v := range x[i*m : (i+1)*m] {
			if v == 0 {
				continue
			}
			for t := 0; t < r; t++ {
				q[j*r+t] += float64(v) * float64(p[i*r+t])
			}
		}
	}
	return q
}

func mulPQtGo(p, q []float32, n, m, r int) []float32 {
	dst := make([]float32, n*m)
	for i := 0; i < n; i++ {
		for j := 0; j < m; j++ {
			var s float32
			for t := 0; t < r; t++ {
				s += p[i*r+t] * q[j*r+t]
			}
			dst[i*m+j] = s
		}
	}
	return dst
}

// TestLowRankTwin: the parallel, rank-4-unrolled products give the plain
// loops' bits for every shape (one row, one column, more rows than a
// worker's minimum, a large matrix split among workers), ranks 1–6, and
// matrices with zeros, −0 and values of every scale.
func TestLowRankTwin(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	draw := func(k int) []float32 { return withZeros(rng, k, 4) }
	f64 := func(v []float64) []uint64 {
		out := make([]uint64, len(v))
		for i, x := range v {
			out[i] = math.Float64bits(x)
		}
		return out
	}
	for _, dims := range [][2]int{{1, 1}, {1, 9}, {9, 1}, {63, 65}, {130, 70}, {700, 300}} {
		n, m := dims[0], dims[1]
		for r := 1; r <= 6; r++ {
			x, q, p := draw(n*m), draw(m*r), draw(n*r)
			gotP := make([]float64, n*r)
			mulMQ(gotP, x, q, n, m, r)
			require.Equal(t, f64(mulMQGo(x, q, n, m, r)), f64(gotP), "M·Q %dx%d r=%d", n, m, r)
			gotQ := make([]float64, m*r)
			for i := range gotQ {
				gotQ[i] = 7 // mulMtP sets, not adds
			}
			mulMtP(gotQ, x, p, n, m, r)
			require.Equal(t, f64(mulMtPGo(x, p, n, m, r)), f64(gotQ), "Mᵀ·P %dx%d r=%d", n, m, r)
			gotD := make([]float32, n*m)
			mulPQt(gotD, p, q, n, m, r)
			require.Equal(t, tensor.Bytes(mulPQtGo(p, q, n, m, r)), tensor.Bytes(gotD), "P·Qᵀ %dx%d r=%d", n, m, r)
		}
	}
	// A zero of M adds nothing, even times an infinite P or Q (0·∞ would
	// be NaN).
	n, m, r := 9, 40, 4
	x, q, p := draw(n*m), draw(m*r), draw(n*r)
	for i := 0; i < len(x); i += 3 {
		x[i] = 0
	}
	q[5], p[6] = float32(math.Inf(1)), float32(math.Inf(-1))
	gotP := make([]float64, n*r)
	mulMQ(gotP, x, q, n, m, r)
	require.Equal(t, f64(mulMQGo(x, q, n, m, r)), f64(gotP), "M·Q with ∞")
	gotQ := make([]float64, m*r)
	mulMtP(gotQ, x, p, n, m, r)
	require.Equal(t, f64(mulMtPGo(x, p, n, m, r)), f64(gotQ), "Mᵀ·P with ∞")
}
