package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"trainwire.dev/lib/mesh/meshtest"
)

// A job aborted while the blocking allreduce mode waits (it has no
// transport) fails the engine's Run with the mesh's error naming the
// rank; it used to crash closing the transport it does not have.
func TestAllreduceAbortFailsRun(t *testing.T) {
	ms := meshtest.Open(t, 2, nil)
	e := New(ms[0], Config{Mode: ModeAllreduce, Workers: []int{0, 1}, Dim: 4, Timeout: 10 * time.Second}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	e.Push(0, make([]float32, 4)) // rank 0 waits in the allreduce for rank 1
	ms[1].Abort(errors.New("test abort"))
	select {
	case err := <-done:
		if err == nil || ctx.Err() != nil {
			t.Fatalf("Run: %v (ctx: %v)", err, ctx.Err())
		}
	case <-ctx.Done():
		t.Fatal("Run did not return (hang guard)")
	}
}
