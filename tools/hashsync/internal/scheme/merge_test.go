package scheme

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// mergeLists on runs large enough for its two-goroutine copy (and on a
// small merge, which copies on one): the rows of every run, ascending,
// each with its own values.
func TestMergeLists(t *testing.T) {
	for _, rows := range []int{1000, 200_000} {
		const n, w = 4, 2
		rng := rand.New(rand.NewPCG(3, uint64(rows)))
		runs := make([]list, n)
		want := map[uint32][]float32{}
		for i := range rows {
			if rng.IntN(3) != 0 {
				continue
			}
			q := rng.IntN(n)
			v := []float32{float32(i), float32(-i)}
			runs[q].idx = append(runs[q].idx, uint32(i))
			runs[q].val = append(runs[q].val, v...)
			want[uint32(i)] = v
		}
		got := mergeLists("m", rows, w, runs)
		require.Len(t, got.Idx, len(want))
		require.True(t, slices.IsSorted(got.Idx))
		for k, i := range got.Idx {
			require.Equal(t, want[i], got.Val[k*w:k*w+w], "row %d", i)
		}
	}
}
