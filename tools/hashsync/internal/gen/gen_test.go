package gen

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/collective"
)

// measure returns the mean density, densification γ^n and even-range skew
// of n ranks' tensors (skew: Def. 5, of one rank's tensor).
func measure(s Spec, n int) (d, gamma, skew float64) {
	union := map[uint32]bool{}
	parts := make([]int, n)
	tot := 0
	for r := range n {
		t := s.Generate("t", r, 0, 0)
		tot += t.Nnz()
		for _, i := range t.Idx {
			union[i] = true
		}
	}
	t0 := s.Generate("t", 0, 0, 0)
	for _, i := range t0.Idx {
		for j := range n {
			if lo, hi := collective.Chunk(s.Rows, n, j); int(i) >= lo && int(i) < hi {
				parts[j]++
			}
		}
	}
	mx := 0
	for _, p := range parts {
		mx = max(mx, p)
	}
	d = float64(tot) / float64(n) / float64(s.Rows)
	gamma = float64(len(union)) / (float64(tot) / float64(n))
	skew = float64(mx) / (float64(t0.Nnz()) / float64(n))
	return
}

// Generator A calibration (seed-zen.md §5.2): V = 200,000, s = 1.0, d = 1.52%
// gives γ^2 ≈ 1.77, γ^4 ≈ 3.11, γ^8 ≈ 5.41 and an 8-way skew ≈ 5.45.
func TestZipfCalibration(t *testing.T) {
	s := Spec{Model: "zipf", Rows: 200_000, Width: 1, Density: 0.0152, Skew: 1.0, Seed: 1}
	require.NoError(t, s.Check())
	for _, c := range []struct {
		n           int
		gamma, skew float64
	}{{2, 1.77, 1.79}, {4, 3.11, 3.13}, {8, 5.41, 5.45}} {
		d, g, sk := measure(s, c.n)
		assert.InDelta(t, 0.0152, d, 0.0152*0.05, "n=%d density", c.n)
		assert.InDelta(t, c.gamma, g, c.gamma*0.06, "n=%d γ", c.n)
		assert.InDelta(t, c.skew, sk, c.skew*0.08, "n=%d skew", c.n)
	}
}

func TestDeterministicAndDistinct(t *testing.T) {
	for name, s := range map[string]Spec{
		"zipf":      {Model: "zipf", Rows: 5000, Width: 3, Density: 0.05, Skew: 1.1, Seed: 9},
		"bernoulli": {Model: "bernoulli", Rows: 5000, Width: 2, Density: 0.05, Skew: 2, Overlap: 0.3, Seed: 9},
		"topk":      {Model: "topk", Rows: 4000, Width: 1, Density: 0.05, Skew: 4, Overlap: 0.5, Seed: 9},
	} {
		require.NoError(t, s.Check(), name)
		a, b := s.Generate("x", 1, 2, 0), s.Generate("x", 1, 2, 0)
		assert.Equal(t, a, b, "%s: same inputs, same tensor", name)
		require.NoError(t, a.Check(), name)
		c := s.Generate("x", 2, 2, 0)
		assert.NotEqual(t, a.Idx, c.Idx, "%s: ranks differ", name)
		assert.InDelta(t, s.Density, float64(a.Nnz())/float64(s.Rows), s.Density*0.3, name)
	}
}

// The Bernoulli model's overlap ratio is q and γ^k = (1−(1−q)^k)/q.
func TestBernoulliOverlap(t *testing.T) {
	s := Spec{Model: "bernoulli", Rows: 400_000, Width: 1, Density: 0.02, Skew: 1, Overlap: 0.2, Seed: 3}
	_, g, _ := measure(s, 4)
	want := (1 - 0.8*0.8*0.8*0.8) / 0.2
	assert.InDelta(t, want, g, want*0.03)
}

// Density 1: every row, each counted at least once, the Zipf head hotter
// than the tail — in time linear in the rows (the general path drew until
// the rarest row came up: 64k rows took 3 s, 256k ~15 s).
func TestZipfDensityOneEveryRow(t *testing.T) {
	s := Spec{Model: "zipf", Rows: 1 << 16, Width: 2, Density: 1, Skew: 1}
	rows, counts := s.zipf(s.rng(1))
	require.Len(t, rows, s.Rows)
	total := 0
	for i, r := range rows {
		require.Equal(t, uint32(i), r)
		require.GreaterOrEqual(t, counts[i], 1)
		total += counts[i]
	}
	require.Equal(t, 2*s.Rows, total)
	require.Greater(t, counts[0], counts[s.Rows-1])
}
