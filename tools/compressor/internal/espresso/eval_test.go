package espresso

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The incremental evaluator (checkpoints, the snapshot before the visited
// gradient, suffix sums) gives exactly the full timeline's F and hands
// its callback the state right after the gradient asked for, whatever
// the sequence of changes; with a bound it only ever answers +Inf for
// strategies that cannot beat it.
func TestEvaluatorMatchesFullRun(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	tr := NewTree(0)
	for range 30 {
		in, err := NewInstance(randomJob(r, 5+r.IntN(30)), randomCluster(r), codecCosts(t, "topk"), tr)
		require.NoError(t, err)
		s := make([]Option, in.N())
		ps, err := in.progs(s, false)
		require.NoError(t, err)
		ev := newEvaluator(in, ps)
		for range 60 {
			i := r.IntN(in.N())
			p := r.IntN(len(tr.Paths))
			o := Option{Path: p, CPU: uint32(r.IntN(1 << tr.Paths[p].Ops()))}
			pp, err := in.prog(i, o, false)
			require.NoError(t, err)
			ev.set(i, pp)
			ps[i] = pp
			ev.refresh()
			want := in.run(ps)
			at := r.IntN(in.N())
			var got *state
			f := ev.evalCut(math.Inf(1), at, func(st *state) bool { got = in.newState(); got.copyFrom(st); return false })
			require.InDelta(t, want, f, 1e-6*want)
			require.NotNil(t, got, "callback not called at %d", at)
			ref := in.newState()
			for j := 0; j <= at; j++ {
				in.step(ref, j, ps[j], nil)
			}
			assert.Equal(t, ref.free, got.free)
			assert.Equal(t, ref.bpEnd, got.bpEnd)
			assert.Equal(t, ref.maxEnd, got.maxEnd)
			// again without a change, asking for another gradient
			at2 := r.IntN(in.N())
			got = nil
			f = ev.evalCut(math.Inf(1), at2, func(st *state) bool { got = in.newState(); got.copyFrom(st); return false })
			require.InDelta(t, want, f, 1e-6*want)
			require.NotNil(t, got, "callback not called at %d", at2)
			bound := want * (0.9 + 0.2*r.Float64())
			g := ev.eval(bound)
			if want < bound {
				assert.InDelta(t, want, g, 1e-6*want)
			} else {
				assert.True(t, math.IsInf(g, 1) || g >= bound)
			}
		}
	}
}
