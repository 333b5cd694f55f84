package agent

import (
	"testing"
	"time"

	"trainwire.dev/lib/wire"
)

// The replication plan follows Algorithm 6.2 when the spans are known,
// R/p chunks otherwise; spans profiled online from ticks (C-RP-3).
func TestPlanAndOnlineProfile(t *testing.T) {
	a, err := New(Config{Rank: 0, World: 2, Peers: []string{"127.0.0.1:0", "127.0.0.1:0"}, M: 2, Buffer: 4 << 20, Parts: 4,
		Interleave: &Interleave{ProfileIters: 3, Bandwidth: 25e6, Alpha: 0.001, Mu: 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	// No spans yet: fixed chunks of R/p.
	p := a.plan(10<<20, 0)
	if len(p) != 10 || p[0].at != -1 || p[9].off != 9<<20 {
		t.Fatalf("plan without spans: %+v", p)
	}
	// Three iterations of ticks, each reporting a comm span 0.2–0.3 s.
	for i := 0; i < 4; i++ {
		a.tick.init()
		a.tick.mu.Lock()
		prevSet := !a.tick.last.IsZero()
		a.tick.mu.Unlock()
		if prevSet {
			// Pretend the previous iteration lasted 0.5 s.
			a.tick.mu.Lock()
			a.tick.last = time.Now().Add(-500 * time.Millisecond)
			a.tick.mu.Unlock()
		}
		ev := &wire.Event{Name: "allreduce", Cat: "comm", Ph: "X", Rank: -1, Stream: -1, Corr: -1, TS: 200e6, Dur: 100e6}
		a.recordTick([]wire.Frame{ev})
	}
	starts, lens := a.spans()
	if len(lens) != 2 || starts[0] > 1e-9 || lens[0] < 0.19 || lens[0] > 0.21 || starts[1] < 0.29 || starts[1] > 0.31 {
		t.Fatalf("profiled spans starts %v lens %v, want [0, 0.3] and [0.2, ~0.2]", starts, lens)
	}
	p = a.plan(10<<20, 0)
	var next int64
	spanOf := map[bool]int64{}
	for i, c := range p {
		if c.off != next || c.size <= 0 || c.size > 1<<20 {
			t.Fatalf("piece %+v: want offset %d, 0 < size ≤ R/p", c, next)
		}
		if i > 0 && c.at < p[i-1].at {
			t.Fatalf("piece %d starts at %v, before piece %d (%v)", i, c.at, i-1, p[i-1].at)
		}
		next += c.size
		spanOf[c.at >= 290*time.Millisecond] += c.size
	}
	if next != 10<<20 || len(spanOf) != 2 {
		t.Fatalf("plan covers %d bytes in %d spans: %v", next, len(spanOf), spanOf)
	}
	// μ·0.2 s at 25 MB/s ≈ 4.5 MB in the first span, the rest in the last.
	if first := spanOf[false]; first < 3<<20 || first > 5<<20 {
		t.Fatalf("%d bytes in the first span, want ≈ 4.3 MiB", first)
	}
}
