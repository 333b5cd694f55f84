package engine

import (
	"math/rand/v2"
	"reflect"
	"testing"

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

// TestAverageModels: the parameter server's average is the element-wise
// mean of the groups' newest models.
func TestAverageModels(t *testing.T) {
	a := tensor.Bytes([]float32{1, 2, 3})
	b := tensor.Bytes([]float32{3, 4, -3})
	got := averageModels(map[int][]byte{0: a, 1: b})
	want := tensor.Bytes([]float32{2, 3, 0})
	if string(got) != string(want) {
		t.Fatalf("average %v, want %v", got, want)
	}
}
