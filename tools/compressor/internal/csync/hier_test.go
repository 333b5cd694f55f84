package csync

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"trainwire.dev/lib/mesh"
)

var interPool = map[int][]*mesh.Mesh{}

// interOf is a second shared mesh of n ranks (the leaders'), apart from
// worldOf's.
func interOf(t tb, n int) []*mesh.Mesh { return pooled(t, interPool, n) }

// TestHierExactness: two-level syncs (nodes of 1–3 ranks, 1–3 nodes) of a
// batch of two tensors with every collective give every rank HierRef's
// result bit for bit over several steps (the leaders' error feedback is
// the node's).
func TestHierExactness(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		locals := rapid.SliceOfN(rapid.IntRange(1, 3), 1, 3).Draw(rt, "locals")
		var nodes [][]int
		n := 0
		for _, l := range locals {
			var ranks []int
			for range l {
				ranks = append(ranks, n)
				n++
			}
			nodes = append(nodes, ranks)
		}
		c := drawCase(rt, 1)
		c.n = n
		steps := c.steps
		ms := worldOf(rt, n)
		xs := interOf(rt, len(nodes))
		ctx := context.Background()
		hs := make([]*Hier, n)
		errs := onAll(n, func(r int) error {
			w, err := New(ctx, ms[r], []string{"test=hier"})
			if err != nil {
				return err
			}
			node, local := nodeOf(nodes, r)
			got, err := Topology(ctx, w, node, local)
			if err != nil {
				return err
			}
			if fmt.Sprint(got) != fmt.Sprint(nodes) {
				return fmt.Errorf("rank %d: topology %v, want %v", r, got, nodes)
			}
			var x *Syncer
			if local == 0 {
				if x, err = New(ctx, xs[node], []string{"test=hier-inter"}); err != nil {
					return err
				}
			}
			hs[r], err = NewHier(w, x, nodes)
			return err
		})
		for r, err := range errs {
			require.NoError(rt, err, "rank %d", r)
		}
		ref := NewRef(len(nodes))
		rng := rand.New(rand.NewPCG(c.dataSeed, 3))
		for step := range steps {
			sp := c.spec(rt)
			us := make([][]*Unit, 2)
			want := make([][]float32, 2)
			for i := range us {
				us[i] = make([]*Unit, n)
				for r := range n {
					us[i][r] = &Unit{Name: fmt.Sprint("t", i), Step: int64(step), Shape: c.shape, Data: gradient(rng, c.d)}
				}
				var err error
				want[i], err = HierRef(ref, nodes, us[i], sp)
				require.NoError(rt, err)
			}
			outs := make([][][]float32, n)
			errs := onAll(n, func(r int) error {
				var err error
				outs[r], _, err = hs[r].syncBatch(ctx, []*Unit{us[0][r], us[1][r]}, []Spec{sp, sp}, true)
				return err
			})
			for r := range n {
				require.NoError(rt, errs[r], "%v: rank %d step %d", c, r, step)
				for i := range want {
					for e := range want[i] {
						if math.Float32bits(want[i][e]) != math.Float32bits(outs[r][i][e]) {
							rt.Fatalf("%v nodes %v: rank %d step %d tensor %d element %d: %v, reference %v", c, nodes, r, step, i, e, outs[r][i][e], want[i][e])
						}
					}
				}
			}
		}
		errs = onAll(n, func(r int) error { return hs[r].Finish(ctx) })
		for r, err := range errs {
			require.NoError(rt, err, "rank %d", r)
		}
	})
}

func nodeOf(nodes [][]int, r int) (int, int) {
	for i, ranks := range nodes {
		for l, p := range ranks {
			if p == r {
				return i, l
			}
		}
	}
	return -1, -1
}

// Two ranks that claim the same node and local rank fail the topology on
// every rank, naming them.
func TestTopologyClash(t *testing.T) {
	ctx := context.Background()
	ms := worldOf(t, 3)
	errs := onAll(3, func(r int) error {
		w, err := New(ctx, ms[r], nil)
		if err != nil {
			return err
		}
		_, err = Topology(ctx, w, 0, min(r, 1))
		return err
	})
	for r, err := range errs {
		var me *MismatchError
		require.ErrorAs(t, err, &me, "rank %d", r)
		require.Contains(t, err.Error(), "ranks 1 and 2 are both local rank 1 of node 0")
	}
}
