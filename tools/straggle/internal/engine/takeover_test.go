package engine

import (
	"context"
	"testing"
	"time"

	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/mesh/meshtest"
)

// TestProbeAnsweredAfterTakeover is the regression test of a hang seen
// when the controller was killed: a worker had already acked round r to
// the old controller; the new controller probes r again, and the worker
// must answer it (a probe is identified by round and controller), or the
// new controller waits for an ack that never comes. It also checks that
// messages of the replaced controller read after the takeover are
// ignored.
func TestProbeAnsweredAfterTakeover(t *testing.T) {
	ms := meshtest.Open(t, 3, func(c *mesh.Config) { c.Tolerant = true })
	old := newTransport(ms[0], 1<<16, nil)
	defer old.close()
	nw := newTransport(ms[1], 1<<16, nil)
	defer nw.close()
	e := New(ms[2], Config{Mode: ModeRNA, Probes: 1, Eta: -1, Workers: []int{2}, Controller: 0, Dim: 4, Timeout: 10 * time.Second}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()

	expect := func(tr *transport, kind Kind, round uint64) {
		t.Helper()
		tm := time.NewTimer(5 * time.Second)
		defer tm.Stop()
		for {
			select {
			case msg := <-tr.ctrlIn:
				if msg.Kind == kind && msg.Round == round && msg.From == 2 {
					return
				}
			case <-tm.C:
				t.Fatalf("rank %d got no %s for round %d from the worker", tr.rank, kind, round)
			}
		}
	}
	// The old controller probes round 5; the worker's gradient comes
	// and it acks to rank 0.
	if err := old.send(2, Msg{Kind: KindProbe, Round: 5}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	e.Push(0, []float32{1, 1, 1, 1})
	expect(old, KindAck, 5)
	// Rank 1 takes over: Sync, then it probes round 5 again.
	if err := nw.send(2, Msg{Kind: KindSync}); err != nil {
		t.Fatal(err)
	}
	expect(nw, KindState, 0)
	if err := nw.send(2, Msg{Kind: KindProbe, Round: 5}); err != nil {
		t.Fatal(err)
	}
	expect(nw, KindAck, 5)
	// The old controller's last activation, read after the SYNC (each
	// peer has its own reader), must not run: the worker would then
	// ignore the new controller's re-run of an older round as
	// overtaken, and never answer it.
	if err := old.send(2, Msg{Kind: KindActivate, Round: 9, Rank: 0, Members: []int32{0, 2}}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := nw.send(2, Msg{Kind: KindActivate, Round: 8, Epoch: 1, Rank: 1, Members: []int32{2}}); err != nil {
		t.Fatal(err)
	}
	expect(nw, KindDone, 8)
	cancel()
	<-done
}
