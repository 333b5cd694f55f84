package costmodel

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFitLinearExact(t *testing.T) {
	var s []Sample
	for _, x := range []float64{1, 2, 5, 10, 100} {
		s = append(s, Sample{x, 3 + 0.5*x})
	}
	l, e, err := FitLinear(s)
	require.NoError(t, err)
	assert.InDelta(t, 3, l.Alpha, 1e-9)
	assert.InDelta(t, 0.5, l.Beta, 1e-9)
	assert.InDelta(t, 0, e, 1e-9)
	assert.True(t, l.Subadditive())
}

func TestFitAutoFindsThreshold(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	want := Piecewise{Alpha: 250, Beta: 0.01, Threshold: 4e6}
	var s []Sample
	for x := 1e4; x < 6.4e7; x *= 1.5 {
		s = append(s, Sample{x, want.At(x) * (1 + 0.01*(rng.Float64()-0.5))})
	}
	f, err := FitAuto(s)
	require.NoError(t, err)
	pw, ok := f.Cost.(Piecewise)
	require.True(t, ok, "got %v", f.Cost)
	assert.InEpsilon(t, want.Beta, pw.Beta, 0.05)
	assert.InEpsilon(t, want.Alpha, pw.Alpha, 0.05)
	assert.False(t, pw.Subadditive())
	assert.Less(t, f.RMSE, 0.5*f.LinearRMSE)
}

func TestFitAutoKeepsLinearData(t *testing.T) {
	var s []Sample
	for x := 1.0; x < 1e6; x *= 2 {
		s = append(s, Sample{x, 10 + 2*x})
	}
	f, err := FitAuto(s)
	require.NoError(t, err)
	_, ok := f.Cost.(Linear)
	assert.True(t, ok, "got %v", f.Cost)
}

func TestBadSamples(t *testing.T) {
	_, _, err := FitLinear(nil)
	assert.ErrorIs(t, err, ErrSamples)
	_, _, err = FitLinear([]Sample{{1, -1}})
	assert.ErrorIs(t, err, ErrSamples)
}

func TestSubadditive(t *testing.T) {
	assert.False(t, Linear{Alpha: -1, Beta: 1}.Subadditive())
	assert.True(t, Piecewise{Alpha: 1, Beta: 1, Threshold: 0}.Subadditive())
	assert.False(t, Piecewise{Alpha: 1, Beta: 1, Threshold: 5}.Subadditive())
	p := Piecewise{Alpha: 1, Beta: 1, Threshold: 5}
	// The counterexample that makes it non-subadditive.
	assert.Greater(t, p.At(12), p.At(6)+p.At(6)-1.5)
}

// Noisy samples whose least-squares line starts below zero (a loaded
// machine: the small messages waited longest) fit with α, β ≥ 0; the
// planners then never see a negative time.
func TestFitLinearNeverNegative(t *testing.T) {
	s := []Sample{{X: 1 << 10, T: 9e6}, {X: 1 << 20, T: 2e6}, {X: 4 << 20, T: 9e6}, {X: 8 << 20, T: 15e6}}
	l, _, err := FitLinear(s)
	require.NoError(t, err)
	require.GreaterOrEqual(t, l.Alpha, 0.0)
	require.GreaterOrEqual(t, l.Beta, 0.0)
	require.Positive(t, l.At(1))
	// Falling times: flat.
	l, _, err = FitLinear([]Sample{{X: 1, T: 10}, {X: 2, T: 8}, {X: 3, T: 6}})
	require.NoError(t, err)
	require.Zero(t, l.Beta)
	require.Positive(t, l.Alpha)
	// A clean line keeps its exact fit.
	l, _, err = FitLinear([]Sample{{X: 0, T: 5}, {X: 10, T: 25}, {X: 20, T: 45}})
	require.NoError(t, err)
	require.InDelta(t, 5, l.Alpha, 1e-9)
	require.InDelta(t, 2, l.Beta, 1e-12)
}
