package fusion

import (
	"math/rand/v2"
	"testing"

	"trainwire.dev/lib/costmodel"
)

// resnetLike is a synthetic profile shaped like ResNet-101's 314 gradients
// in backprop order: conv weights of 16 KB to 9.4 MB with tiny batch-norm
// parameters between them; times in ns, sizes in bytes; DGC-like
// compression (0.4 ms launch) over a 10 Gbit/s allgather.
func resnetLike(n int, seed uint64) *Problem {
	rng := rand.New(rand.NewPCG(seed, 7))
	size := make([]float64, n)
	b := make([]float64, n)
	for i := range size {
		if i%3 == 0 {
			size[i] = float64(16<<10) * float64(1+rng.IntN(600))
		} else {
			size[i] = float64(int(1) << (8 + rng.IntN(4)))
		}
		b[i] = 20e3 + size[i]*0.05
	}
	g := costmodel.Linear{Alpha: 50e3, Beta: 0.8 * 0.01 * 8} // 1 % of the bytes over 10 Gbit/s, ×8 ranks
	h := costmodel.Linear{Alpha: 400e3, Beta: 0.004}
	p, err := NewProblem(40e6, size, b, g, h)
	if err != nil {
		panic(err)
	}
	return p
}

func BenchmarkPareto314(b *testing.B) {
	p := resnetLike(314, 1)
	for b.Loop() {
		Pareto(p)
	}
}

// Algorithm 5.1 is exponential on this profile (15 s at N = 80), so it is
// benchmarked at N = 40.
func BenchmarkAlg51_40(b *testing.B) {
	p := resnetLike(40, 1)
	for b.Loop() {
		Alg51(p, Alg51Options{})
	}
}

func BenchmarkPlanAuto314(b *testing.B) {
	p := resnetLike(314, 1)
	for b.Loop() {
		if _, err := Plan(p, AlgoAuto, Alg51Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

// The same profile with a piecewise compression cost (flat below 4 MB), as
// fitted from GPU codec samples: the general frontier search runs.
func BenchmarkParetoPiecewise314(b *testing.B) {
	p := resnetLike(314, 1)
	p.H = costmodel.Piecewise{Alpha: 400e3, Beta: 0.004, Threshold: 4e6}
	for b.Loop() {
		Pareto(p)
	}
}
