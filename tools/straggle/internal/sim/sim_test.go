package sim

import (
	"math/rand/v2"
	"testing"
)

// TestReferenceTables reproduces every §5.5 reference table within its
// stated tolerance.
func TestReferenceTables(t *testing.T) {
	for _, tab := range Tables {
		t.Run(tab, func(t *testing.T) {
			checks, err := Reproduce(tab, 1)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range checks {
				if !c.OK() {
					t.Errorf("%s %s / %s: got %.3f, spec %.3f (%.1f%% off, tolerance %.0f%%)", c.Table, c.Row, c.Col, c.Got, c.Want, 100*c.Err(), 100*c.Tol)
				}
			}
		})
	}
}

func TestReplayFromSeed(t *testing.T) {
	d := uniformDur(20, 0, 20, 4, 1)
	a := ModelB(RNA, 4, 2, 500, 5, d, 7)
	b := ModelB(RNA, 4, 2, 500, 5, d, 7)
	c := ModelB(RNA, 4, 2, 500, 5, d, 8)
	for i := range a.Rounds {
		if a.Rounds[i] != b.Rounds[i] || a.Contribs[i] != b.Contribs[i] {
			t.Fatalf("round %d differs between two runs with the same seed", i)
		}
	}
	same := true
	for i := range a.Rounds {
		same = same && a.Rounds[i] == c.Rounds[i]
	}
	if same {
		t.Fatal("different seeds gave the same run")
	}
}

func TestAccumulate(t *testing.T) {
	// Pending at versions k−2, k−1, k gives (g1 + 2g2 + 3g3)/6.
	g := Accumulate([]int{3, 4, 5}, [][]float64{{6}, {12}, {18}}, false)
	if want := (6 + 2*12 + 3*18) / 6.0; g[0] != want {
		t.Fatalf("wavg = %v, want %v", g[0], want)
	}
	if s := Accumulate([]int{3, 4, 5}, [][]float64{{6}, {12}, {18}}, true); s[0] != 36 {
		t.Fatalf("sum = %v, want 36", s[0])
	}
}

func TestContributorsIdentity(t *testing.T) {
	// Model A's contributors per round = rank of the fastest probe ≈ (N+1)/(q+1).
	rng := rand.New(rand.NewPCG(1, 2))
	for _, q := range []int{1, 2, 3} {
		n, tot := 20, 0
		for range 20000 {
			best := n
			for _, p := range Sample(rng, n, q) {
				best = min(best, p+1)
			}
			tot += best
		}
		got, want := float64(tot)/20000, float64(n+1)/float64(q+1)
		if abs(got-want)/want > 0.03 {
			t.Errorf("q=%d: mean contributors %.2f, want %.2f", q, got, want)
		}
	}
}
