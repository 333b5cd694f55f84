package interval

import (
	"math/rand"
	"testing"
)

func TestUnionIntersect(t *testing.T) {
	u := Union([]I{{320, 500}, {50, 80}, {100, 300}, {700, 800}, {250, 650}, {80, 90}})
	want := []I{{50, 90}, {100, 650}, {700, 800}}
	if len(u) != len(want) {
		t.Fatalf("union %v", u)
	}
	for i := range u {
		if u[i] != want[i] {
			t.Fatalf("union %v, want %v", u, want)
		}
	}
	if Total(u) != 40+550+100 {
		t.Fatalf("total %d", Total(u))
	}
	comp := Union([]I{{100, 300}, {320, 500}, {700, 800}})
	comm := Union([]I{{250, 650}})
	if got := Total(Intersect(comm, comp)); got != 230 {
		t.Fatalf("overlap %d, want 230", got)
	}
}

// TestAgainstBitmap checks union and intersection against a per-unit
// bitmap on random sets.
func TestAgainstBitmap(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 500; trial++ {
		var a, b []I
		var ma, mb [220]bool
		for k := rng.Intn(8); k > 0; k-- {
			s := rng.Int63n(190)
			x := I{s, s + rng.Int63n(20)}
			a = append(a, x)
			for p := x.S; p < x.E; p++ {
				ma[p] = true
			}
		}
		for k := rng.Intn(8); k > 0; k-- {
			s := rng.Int63n(190)
			x := I{s, s + rng.Int63n(20)}
			b = append(b, x)
			for p := x.S; p < x.E; p++ {
				mb[p] = true
			}
		}
		var na, nab int64
		for p := range ma {
			if ma[p] {
				na++
			}
			if ma[p] && mb[p] {
				nab++
			}
		}
		ua, ub := Union(a), Union(b)
		if Total(ua) != na || Total(Intersect(ua, ub)) != nab {
			t.Fatalf("trial %d: union %d/%d, intersection %d/%d", trial, Total(ua), na, Total(Intersect(ua, ub)), nab)
		}
	}
}
