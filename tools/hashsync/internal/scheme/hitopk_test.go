package scheme

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/collective"
)

// H6 (seed-topk.md §5.5): with ρ > 0 the first iteration's result is
// Σ_nodes Σ_segments scatter(TopK(node sum of the segment, k_seg)), exact
// selection by row L2 norm, ties to the lower row; every rank holds it.
func TestHiTopKOracle(t *testing.T) {
	const n, L, rows, width = 4, 2, 400, 2
	const rho = 0.05
	in := make([]*Tensor, n)
	for r := range n {
		in[r] = randTensor(rand.New(rand.NewPCG(21, uint64(r))), "g", rows, width, 0.2, true)
	}
	// The oracle.
	want := make([]float32, rows*width)
	for node := range n / L {
		sum := make([]float32, rows*width)
		for j := range L {
			x := in[node*L+j]
			for k, i := range x.Idx {
				addRow(sum[int(i)*width:int(i)*width+width], x.Val[k*width:k*width+width])
			}
		}
		for j := range L {
			lo, hi := collective.Chunk(rows, L, j)
			k := max(1, int(rho*float64(hi-lo)))
			seg := make([]int, 0, hi-lo)
			for r := lo; r < hi; r++ {
				if nonzero(sum[r*width : r*width+width]) {
					seg = append(seg, r)
				}
			}
			norm := func(r int) float64 {
				v := 0.0
				for _, x := range sum[r*width : r*width+width] {
					v += float64(x) * float64(x)
				}
				return v
			}
			slices.SortStableFunc(seg, func(a, b int) int {
				if norm(a) != norm(b) {
					if norm(a) > norm(b) {
						return -1
					}
					return 1
				}
				return a - b
			})
			for _, r := range seg[:min(k, len(seg))] {
				addRow(want[r*width:r*width+width], sum[r*width:r*width+width])
			}
		}
	}
	oracle := FromDense("g", want, rows, width)
	cfg := DefaultConfig("hitopk")
	cfg.Rho, cfg.LocalSize = rho, L
	outs := make([]*Tensor, n)
	errs := runAll(t, n, cfg, func(r int, s *Syncer) error {
		out, _, err := s.Sync(context.Background(), s.Prepare(in[r]))
		outs[r] = out
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
	for r := range n {
		equalBits(t, oracle, outs[r], fmt.Sprintf("rank %d", r))
	}
	require.LessOrEqual(t, oracle.Nnz(), n/L*int(rho*rows)+L*n)
}
