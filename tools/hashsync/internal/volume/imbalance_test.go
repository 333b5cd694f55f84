package volume

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"

	"trainwire.dev/lib/zen"
)

// T4 / R4: h0's push and pull imbalance stays under 1 + 3·sqrt(n ln n/m)
// (and under 1.1 for m ≥ 10^5 keys, n ≤ 16) on skewed data, where even
// ranges give the skewness ratio.
func TestH0Imbalance(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	// Skewed keys: most in the first 10% of the range.
	for _, n := range []int{2, 4, 8, 16} {
		m := 100_000
		set := map[uint32]bool{}
		for len(set) < m {
			if rng.Float64() < 0.7 {
				set[uint32(rng.IntN(1<<20))] = true
			} else {
				set[uint32(rng.IntN(1<<23))] = true
			}
		}
		counts := make([]int, n)
		even := make([]int, n)
		for k := range set {
			counts[zen.H0(k, 3, n)]++
			even[int(uint64(k)*uint64(n)>>23)]++
		}
		mx, me := 0, 0
		for j := range n {
			mx, me = max(mx, counts[j]), max(me, even[j])
		}
		imb := float64(n*mx) / float64(m)
		assert.Less(t, imb, 1.1, "n=%d", n)
		assert.Less(t, imb, ImbalanceBound(n, float64(m))+0.02, "n=%d", n)
		if n >= 4 {
			assert.Greater(t, float64(n*me)/float64(m), 2.0, "n=%d even ranges", n)
		}
	}
}
