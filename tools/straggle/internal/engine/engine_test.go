package engine

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/mesh/meshtest"
)

// runInProcess runs world engines on an in-process tolerant mesh with
// zero-compute workers that push a fresh gradient of ones (tagged with
// their current version) whenever they have none pending, and returns
// every rank's results.
func runInProcess(t *testing.T, world, rounds int, jitter time.Duration, mode string) [][]Result {
	t.Helper()
	ms := meshtest.Open(t, world, func(c *mesh.Config) { c.Tolerant = true })
	workers := make([]int, world)
	for r := range workers {
		workers[r] = r
	}
	res := make([][]Result, world)
	engines := make([]*Engine, world)
	for r, m := range ms {
		engines[r] = New(m, Config{Mode: mode, Probes: 2, Eta: -1, Workers: workers, Rounds: rounds, Seed: 3, GroupSize: 2, Dim: 4, Timeout: 10 * time.Second},
			func(x *Result) float64 {
				c := *x
				c.Sum = slices.Clone(x.Sum)
				res[r] = append(res[r], c)
				return 0
			})
		if jitter > 0 {
			rng := rand.New(rand.NewPCG(uint64(r), 9))
			var mu sync.Mutex
			engines[r].t.jitter = func() time.Duration {
				mu.Lock()
				defer mu.Unlock()
				return time.Duration(rng.Int64N(int64(jitter)))
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r, e := range engines {
		wg.Go(func() { errs[r] = e.Run(ctx) })
		wg.Go(func() {
			// Zero compute: a gradient of ones as soon as the last is taken.
			for ctx.Err() == nil {
				select {
				case <-e.Stopped():
					return
				default:
				}
				e.mu.Lock()
				empty := len(e.pending) == 0
				e.mu.Unlock()
				if empty {
					e.Push(e.Applied(), []float32{1, 1, 1, 1})
				}
				time.Sleep(50 * time.Microsecond)
			}
		})
	}
	// Watchdog: no round may take more than a few seconds.
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("engines did not finish: deadlock?")
	}
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return res
}

// TestNoDoubleActivation (R2, R3, R4, R13): zero-delay workers answer
// probes at once, every message is delayed by a random 0–1 ms; over many
// rounds the round ids strictly increase, every rank sees the same rounds
// with the same initiator, the initiator contributed, 1 ≤ Σw ≤ N, and
// with gradients of ones the reduced sum is exactly Σw in every element.
func TestNoDoubleActivation(t *testing.T) {
	rounds := 600
	res := runInProcess(t, 4, rounds, time.Millisecond, ModeRNA)
	for r, rs := range res {
		if len(rs) != rounds {
			t.Fatalf("rank %d applied %d rounds, want %d", r, len(rs), rounds)
		}
		for i, x := range rs {
			if x.Round != uint64(i+1) {
				t.Fatalf("rank %d: round %d at position %d", r, x.Round, i)
			}
			y := res[0][i]
			if x.Initiator != y.Initiator || x.Weight != y.Weight || !slices.Equal(x.Probes, y.Probes) {
				t.Fatalf("round %d: rank %d saw initiator %d Σw %d probes %v, rank 0 %d %d %v", x.Round, r, x.Initiator, x.Weight, x.Probes, y.Initiator, y.Weight, y.Probes)
			}
			if !slices.Contains(x.Probes, x.Initiator) || x.Weight < 1 || x.Weight > 4 {
				t.Fatalf("round %d: initiator %d probes %v Σw %d", x.Round, x.Initiator, x.Probes, x.Weight)
			}
			if x.Initiator == r && !x.Contributed {
				t.Fatalf("round %d: initiator %d had no gradient", x.Round, r)
			}
			for _, v := range x.Sum {
				if v != float32(x.Weight) {
					t.Fatalf("round %d: sum %v, want Σw = %d", x.Round, x.Sum, x.Weight)
				}
			}
		}
	}
}

// TestGroupsInProcess: groups mode with random jitter finishes every
// round, the groups' sums are their sizes.
func TestGroupsInProcess(t *testing.T) {
	res := runInProcess(t, 4, 300, time.Millisecond, ModeGroups)
	for r, rs := range res {
		if len(rs) != 300 {
			t.Fatalf("rank %d: %d rounds", r, len(rs))
		}
		for _, x := range rs {
			if x.Members != 2 || x.Sum[0] != float32(x.Weight) || x.Weight != 2 {
				t.Fatalf("rank %d round %d: %+v", r, x.Round, x)
			}
		}
	}
}
