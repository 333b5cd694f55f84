package inject

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	m, err := Flags{Compute: 20 * time.Millisecond, Slow: "k=1,s=4", Delay: "uniform:0ms,20ms", Mixed: []string{"2-3:uniform:50ms,100ms"}}.Model()
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		if x := m.Draw(0, rng); x < 80 || x > 100 {
			t.Fatalf("rank 0 (×4): %v ms", x)
		}
		if x := m.Draw(1, rng); x < 20 || x > 40 {
			t.Fatalf("rank 1: %v ms", x)
		}
		if x := m.Draw(3, rng); x < 70 || x > 120 {
			t.Fatalf("rank 3 (group delay): %v ms", x)
		}
	}
	if m.Mean(0) != 90 {
		t.Fatalf("mean of rank 0 = %v", m.Mean(0))
	}
	m, err = Flags{Slow: "ranks=1,3,s=2", RandomSlow: "p=1/4,factor=3", Lognormal: "mean=1219ms,sd=760ms,scale=0.01"}.Model()
	if err != nil || m.Slow[1] != 2 || m.Slow[3] != 2 || m.Slow[0] != 0 || m.RandomP != 0.25 {
		t.Fatalf("%+v %v", m, err)
	}
	for _, bad := range []Flags{{Slow: "k=1"}, {Delay: "uniform:5ms"}, {Delay: "normal:1ms,2ms"}, {Mixed: []string{"x:uniform:1ms,2ms"}}, {RandomSlow: "p=2,factor=3"}, {Lognormal: "mean=x"}} {
		if _, err := bad.Model(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// FuzzFlags: no flag value makes the parsers panic or allocate without
// bound, and what parses draws finite, non-negative times.
func FuzzFlags(f *testing.F) {
	f.Add("k=1,s=4", "uniform:0ms,20ms", "2-3:uniform:50ms,100ms", "p=1/4,factor=3", "mean=1219ms,sd=760ms,scale=0.01")
	f.Add("ranks=0,3,s=8", "uniform:1s,2s", "1,3:uniform:0s,1ms", "p=0.5,factor=2", "")
	f.Fuzz(func(t *testing.T, slow, delay, mixed, random, logn string) {
		m, err := Flags{Slow: slow, Delay: delay, Mixed: []string{mixed}, RandomSlow: random, Lognormal: logn}.Model()
		if err != nil {
			return
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for r := range 4 {
			if x := m.Draw(r, rng); x < 0 || x != x {
				t.Fatalf("rank %d drew %v", r, x)
			}
		}
	})
}
