package rng

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The generator is part of the wire contract (randomk sends no indices;
// every rank and the GPU kernels must draw the same numbers): these values
// pin it. A change here is a format change (docs/compressor.md).
func TestGolden(t *testing.T) {
	k := Key(0, 0, "w", PurposeIndices)
	require.Equal(t, Mix64(k+Golden), Draw(k, 0))
	s := Seq{Key: k}
	require.Equal(t, Draw(k, 0), s.Next())
	require.Equal(t, Draw(k, 1), s.Next())
	require.Equal(t, uint64(2), s.I)
	// SplitMix64's published first output for seed 0 is Mix64(Golden).
	require.Equal(t, uint64(0xE220A8397B1DCDAF), Mix64(Golden))
}

func TestKeySeparatesInputs(t *testing.T) {
	base := Key(1, 2, "layer.weight", PurposeRound)
	for _, k := range []uint64{
		Key(2, 2, "layer.weight", PurposeRound),
		Key(1, 3, "layer.weight", PurposeRound),
		Key(1, 2, "layer.bias", PurposeRound),
		Key(1, 2, "layer.weight", PurposeWindow),
	} {
		require.NotEqual(t, base, k)
	}
}

func TestBelowRangeAndUniform(t *testing.T) {
	const n, draws = 7, 70000
	var hist [n]int
	s := Seq{Key: Key(42, 0, "x", PurposeSample)}
	for range draws {
		v := s.Below(n)
		require.Less(t, v, uint64(n))
		hist[v]++
	}
	// χ² with 6 degrees of freedom; 22.46 is the 0.999 quantile, so a
	// correct generator fails this with probability 1e-3 for this fixed
	// seed — i.e. deterministically passes or fails.
	exp := float64(draws) / n
	chi := 0.0
	for _, h := range hist {
		d := float64(h) - exp
		chi += d * d / exp
	}
	require.Less(t, chi, 22.46, "histogram %v", hist)
	s1 := Seq{Key: 9}
	require.Equal(t, uint64(0), s1.Below(1))
}

func TestUnit24(t *testing.T) {
	require.Equal(t, float32(0), Unit24(0))
	require.Equal(t, float32(1)-1.0/(1<<24), Unit24(^uint64(0)))
	require.Equal(t, float32(0.5), Unit24(1<<63))
}
