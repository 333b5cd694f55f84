package placement

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// Extra restores min(m, live) copies of every checkpoint that still has a
// live holder, on distinct live machines outside its holder set, whatever
// the failed set (every N ≤ 12, m ≤ 4, up to three failures), and its
// answer does not depend on the order the failures are listed in.
func TestExtraRestoresM(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 1; n <= 12; n++ {
		for m := 1; m <= min(n, 4); m++ {
			p, err := Plan(n, m)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k <= min(3, n); k++ {
				for trial := 0; trial < 20; trial++ {
					dead := rng.Perm(n)[:k]
					for i := range dead {
						dead[i]++
					}
					checkExtra(t, p, dead)
					rev := slices.Clone(dead)
					slices.Reverse(rev)
					if a, b := p.Extra(dead), p.Extra(rev); !reflect.DeepEqual(a, b) {
						t.Fatalf("N=%d m=%d: Extra(%v) = %v but Extra(%v) = %v", n, m, dead, a, rev, b)
					}
				}
			}
		}
	}
}

func checkExtra(t *testing.T, p *Placement, dead []int) {
	t.Helper()
	isDead := map[int]bool{}
	for _, d := range dead {
		isDead[d] = true
	}
	live := p.N - len(dead)
	ex := p.Extra(dead)
	for i := 1; i <= p.N; i++ {
		copies := map[int]bool{}
		for _, h := range p.Holders(i) {
			if !isDead[h] {
				copies[h] = true
			}
		}
		lostHolder := len(copies) < len(p.Holders(i))
		if len(copies) == 0 {
			if len(ex[i]) != 0 {
				t.Fatalf("N=%d m=%d dead %v: machine %d's checkpoint is lost, yet extra copies %v", p.N, p.M, dead, i, ex[i])
			}
			continue
		}
		if !lostHolder && len(ex[i]) != 0 {
			t.Fatalf("N=%d m=%d dead %v: machine %d lost no holder, yet extra copies %v", p.N, p.M, dead, i, ex[i])
		}
		for _, j := range ex[i] {
			if isDead[j] || copies[j] {
				t.Fatalf("N=%d m=%d dead %v: machine %d's extra copy on %d (dead or already a holder)", p.N, p.M, dead, i, j)
			}
			copies[j] = true
		}
		if len(copies) != min(p.M, live) {
			t.Fatalf("N=%d m=%d dead %v: machine %d's checkpoint has %d live copies, want %d", p.N, p.M, dead, i, len(copies), min(p.M, live))
		}
	}
}

// The golden case of docs/ckpt.md: N=6, m=2, machine 2 fails: machine 1's
// checkpoint goes to 3, machine 2's (held by 1 alone now) to 4, not both
// to 3; then 4 fails too: 1's stays on 3, 2's moves to 5, 3's (held by 3
// alone now) goes to 6 and 4's (held by 3) to 1; a whole group lost: no
// copies (the persistent tier's case).
func TestExtraGolden(t *testing.T) {
	p, _ := Plan(6, 2)
	for _, tc := range []struct {
		dead []int
		want map[int][]int
	}{
		{nil, map[int][]int{}},
		{[]int{2}, map[int][]int{1: {3}, 2: {4}}},
		{[]int{2, 4}, map[int][]int{1: {3}, 2: {5}, 3: {6}, 4: {1}}},
		{[]int{1, 2}, map[int][]int{}},
	} {
		if got := p.Extra(tc.dead); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Extra(%v) = %v, want %v", tc.dead, got, tc.want)
		}
	}
}
