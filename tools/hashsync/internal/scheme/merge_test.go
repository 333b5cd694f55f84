package scheme

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// randRuns spreads about a third of rows rows over n ascending runs, row i
// with values i·w+1, i·w+2, …; want is every row's values.
func randRuns(rng *rand.Rand, rows, n, w int) (runs []list, want map[uint32][]float32) {
	runs, want = make([]list, n), map[uint32][]float32{}
	for i := range rows {
		if rng.IntN(3) != 0 {
			continue
		}
		q := rng.IntN(n)
		v := make([]float32, w)
		for e := range v {
			v[e] = float32(i*w + e + 1)
		}
		runs[q].idx = append(runs[q].idx, uint32(i))
		runs[q].val = append(runs[q].val, v...)
		want[uint32(i)] = v
	}
	return runs, want
}

// The merger on runs landing concurrently in chunks of every size from one
// row to the whole run, both widths (the fixed-size copy of 16 and the
// general one), with empty runs among them: every row of every run,
// ascending, each with its own values.
func TestMergerStreamed(t *testing.T) {
	for _, c := range []struct{ rows, n, w, chunk int }{
		{1000, 4, 2, 1}, {1000, 4, 16, 7}, {200_000, 4, 16, 4096}, {200_000, 8, 3, 1 << 20},
		{50, 6, 16, 3}, {0, 3, 16, 5},
	} {
		rng := rand.New(rand.NewPCG(3, uint64(c.rows*c.n+c.chunk)))
		runs, want := randRuns(rng, c.rows, c.n, c.w)
		got, err := mergeRuns("m", c.rows, c.w, runs, c.chunk)
		require.NoError(t, err, "%+v", c)
		require.Len(t, got.Idx, len(want), "%+v", c)
		require.True(t, slices.IsSorted(got.Idx), "%+v", c)
		for k, i := range got.Idx {
			require.Equal(t, want[i], got.Row(k), "%+v: row %d", c, i)
		}
	}
}

// A row in two runs, or a run out of order, fails the merge (it never
// yields a result with a row twice or out of place), however the chunks
// land.
func TestMergerRejects(t *testing.T) {
	for _, c := range []struct {
		name string
		runs [][]uint32
		want string
	}{
		{"shared row", [][]uint32{{1, 5, 9}, {2, 5, 7}}, "row 5 after row 5"},
		{"shared last row", [][]uint32{{1, 9}, {2, 9}}, "row 9 after row 9"},
		{"descending run", [][]uint32{{1, 8, 3}, {2, 4}}, "row 3 after row 8"},
		{"repeated row", [][]uint32{{1, 3, 3}, {2}}, "row 3 after row 3"},
	} {
		for _, chunk := range []int{1, 2, 10} {
			runs := make([]list, len(c.runs))
			for q, idx := range c.runs {
				runs[q] = list{idx, make([]float32, len(idx))}
			}
			_, err := mergeRuns("m", 10, 1, runs, chunk)
			require.ErrorContains(t, err, c.want, "%s, chunks of %d", c.name, chunk)
		}
	}
}

// The merger counts the all-zero rows it merges, so that Compact skips its
// pass only when there is nothing to drop: both widths, with and without
// zero rows (a row's non-zero element anywhere in it).
func TestMergerZeros(t *testing.T) {
	for _, w := range []int{3, 16} {
		for _, withZeros := range []bool{false, true} {
			rng := rand.New(rand.NewPCG(7, uint64(w)))
			runs := make([]list, 3)
			var want []uint32
			for i := range 5000 {
				if rng.IntN(4) != 0 {
					continue
				}
				q := rng.IntN(len(runs))
				v := make([]float32, w)
				if !withZeros || rng.IntN(5) != 0 {
					v[rng.IntN(w)] = 1 + rng.Float32()
					want = append(want, uint32(i))
				}
				runs[q].idx = append(runs[q].idx, uint32(i))
				runs[q].val = append(runs[q].val, v...)
			}
			out, err := mergeRuns("z", 5000, w, runs, 64)
			require.NoError(t, err)
			require.Equal(t, !withZeros, out.compact, "width %d", w)
			out.Compact()
			require.Equal(t, want, out.Idx, "width %d, zero rows %v", w, withZeros)
			for k := range out.Idx {
				require.True(t, nonzero(out.Row(k)), "width %d: row %d", w, out.Idx[k])
			}
			require.False(t, out.compact, "the skip is for one Compact only")
		}
	}
}
