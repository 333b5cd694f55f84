package engine

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/tensor"
)

// TestPartition: the spec's worked example splits into the fast and the
// slow four; 50+U(0,50) for everyone stays one group.
func TestPartition(t *testing.T) {
	ranks := []int{0, 1, 2, 3, 4, 5, 6, 7}
	ex := map[int]float64{0: 50, 1: 55, 2: 60, 3: 52, 4: 150, 5: 160, 6: 155, 7: 158}
	if got := Partition(ranks, ex); !reflect.DeepEqual(got, [][]int{{0, 1, 2, 3}, {4, 5, 6, 7}}) {
		t.Fatalf("worked example: %v", got)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		u := map[int]float64{}
		for _, r := range ranks {
			u[r] = 50 + 50*rng.Float64()
		}
		if got := Partition(ranks, u); len(got) != 1 {
			t.Fatalf("uniform 50+U(0,50) split: %v", got)
		}
	}
	// Three tiers split recursively.
	tiers := map[int]float64{0: 10, 1: 11, 2: 100, 3: 101, 4: 1000, 5: 1001}
	if got := Partition([]int{0, 1, 2, 3, 4, 5}, tiers); len(got) != 3 {
		t.Fatalf("three tiers: %v", got)
	}
}

func TestAccumulateWeights(t *testing.T) {
	items := []item{{3, []float32{6}}, {4, []float32{12}}, {5, []float32{18}}}
	g, st := accumulate(items, 6, false)
	if want := float32(6+2*12+3*18) / 6; g[0] != want || st != 2 {
		t.Fatalf("wavg = %v (staleness %d), want %v (2)", g[0], st, want)
	}
	if g, _ := accumulate(items, 6, true); g[0] != 36 {
		t.Fatalf("sum = %v", g[0])
	}
}

func TestGroupsDisjointAndShared(t *testing.T) {
	live := []int{0, 1, 2, 3, 5, 7}
	for r := uint64(1); r < 50; r++ {
		a, b := Groups(9, r, live, 2), Groups(9, r, live, 2)
		if !reflect.DeepEqual(a, b) {
			t.Fatal("groups differ for the same seed and round")
		}
		seen := map[int]bool{}
		for _, g := range a {
			for _, m := range g {
				if seen[m] {
					t.Fatalf("rank %d in two groups of round %d", m, r)
				}
				seen[m] = true
			}
		}
		if len(seen) != len(live) {
			t.Fatalf("round %d covers %d of %d ranks", r, len(seen), len(live))
		}
	}
}

// TestParamServer: the global model starts where the groups start and
// gains each group's progress since the model it last loaded; a fast
// group pushing often is not pulled back toward a slow group's older
// model (an average of the groups' newest would halve its progress).
func TestParamServer(t *testing.T) {
	ps := newParamServer()
	x0 := tensor.Bytes([]float32{8, 8})
	require.NoError(t, ps.start(0, x0))
	require.NoError(t, ps.start(1, x0))
	// The fast group (0) moves from 8 to 6, then to 4 from what it loaded.
	got, err := ps.push(0, tensor.Bytes([]float32{6, 6}))
	require.NoError(t, err)
	require.Equal(t, []float32{6, 6}, tensor.Float32sOrCopy(got))
	got, err = ps.push(0, tensor.Bytes([]float32{4, 5}))
	require.NoError(t, err)
	require.Equal(t, []float32{4, 5}, tensor.Float32sOrCopy(got))
	// The slow group (1) moved from 8 to 7 meanwhile: its step is added.
	got, err = ps.push(1, tensor.Bytes([]float32{7, 9}))
	require.NoError(t, err)
	require.Equal(t, []float32{3, 6}, tensor.Float32sOrCopy(got))
	// The fast group's next push counts from what it loaded (4, 5), not
	// from the server's newest (3, 6).
	got, err = ps.push(0, tensor.Bytes([]float32{3, 4}))
	require.NoError(t, err)
	require.Equal(t, []float32{2, 5}, tensor.Float32sOrCopy(got))
	// Bad pushes are refused and change nothing.
	_, err = ps.push(0, tensor.Bytes([]float32{1, 2, 3}))
	require.ErrorContains(t, err, "3 parameters, the server holds 2")
	_, err = ps.push(0, []byte{1, 2, 3})
	require.ErrorContains(t, err, "not float32s")
	got, err = ps.push(1, tensor.Bytes([]float32{3, 6}))
	require.NoError(t, err)
	require.Equal(t, []float32{2, 5}, tensor.Float32sOrCopy(got))
	// A group with no base push (after a takeover) starts from its push.
	ps = newParamServer()
	got, err = ps.push(3, tensor.Bytes([]float32{1, 1}))
	require.NoError(t, err)
	require.Equal(t, []float32{1, 1}, tensor.Float32sOrCopy(got))
}
