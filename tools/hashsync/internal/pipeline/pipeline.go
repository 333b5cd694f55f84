// Package pipeline is Sven's inter-batch pipeline (docs/sven.md, §6.1.2):
// mini-batches flow through stages that run concurrently, each stage on
// its own goroutine, connected by FIFO queues of capacity 2, while the
// parameters they read lag the newest update by a bounded staleness.
//
// The staleness rule is explicit and deterministic: mini-batch t reads
// the parameters of version v(t) = max(0, t − S) (version u is after u
// updates, applied in order of t), waiting for that version when the
// pipeline runs ahead. A sequential run under the same schedule (Seq)
// therefore gives the same parameters bit for bit, however the stages
// overlap; the engine keeps the S+1 newest versions (the chapter's
// doubled memory).
package pipeline

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// QueueCap is the capacity of the queue in front of every stage (Sven's).
const QueueCap = 2

// DefaultStaleness is Sven's bound: three updates.
const DefaultStaleness = 3

// Item is one mini-batch on its way through the stages.
type Item[P any] struct {
	// T is the mini-batch's index, from 0.
	T int
	// V is the version of Params: the updates of mini-batches 0..V−1.
	V int
	// Params is a snapshot of version V; stages must not change it.
	Params P
	// Data is what the stages pass along (lookups, activations, gradients).
	Data any
}

// Stage is one stage of the pipeline; stages see the items in order of T.
type Stage[P any] func(ctx context.Context, it *Item[P]) error

// Model is what the engine versions: Clone copies parameters, Apply
// applies mini-batch it's update (computed by the stages into it.Data) to
// p in place.
type Model[P any] struct {
	Clone func(p P) P
	Apply func(p P, it *Item[P]) error
}

// Engine runs stages over N mini-batches with bounded staleness.
type Engine[P any] struct {
	Model     Model[P]
	Stages    []Stage[P]
	Staleness int // S ≥ 0; 0 is sequential
	// OnRead, when set, is called as mini-batch t takes version v, with
	// the newest version applied at that moment (tests check the bound).
	OnRead func(t, v, newest int)
	// Times, when set, receives each stage's busy time per mini-batch
	// (index len(Stages) is the update): the stage times of Eq. 6.1/6.2.
	Times func(stage int, d time.Duration)
}

// versions holds the S+1 newest parameter versions.
type versions[P any] struct {
	mu     sync.Mutex
	cond   *sync.Cond
	newest int
	snap   map[int]P
	err    error
}

// Run trains n mini-batches from initial parameters p0 and returns the
// final parameters (version n). The first error of any stage cancels the
// others and is returned, naming the stage and mini-batch.
func (e *Engine[P]) Run(ctx context.Context, p0 P, n int) (P, error) {
	var zero P
	if e.Staleness < 0 {
		return zero, fmt.Errorf("pipeline: staleness %d", e.Staleness)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	vs := &versions[P]{snap: map[int]P{0: e.Model.Clone(p0)}}
	vs.cond = sync.NewCond(&vs.mu)
	stop := context.AfterFunc(ctx, func() { vs.fail(context.Cause(ctx)) })
	defer stop()
	qs := make([]chan *Item[P], len(e.Stages)+1)
	for i := range qs {
		qs[i] = make(chan *Item[P], QueueCap)
	}
	var wg sync.WaitGroup
	wg.Go(func() { e.source(ctx, cancel, vs, qs[0], n) })
	for i, st := range e.Stages {
		wg.Go(func() { e.stage(ctx, cancel, i, st, qs[i], qs[i+1]) })
	}
	cur := e.Model.Clone(p0)
	if err := e.update(ctx, vs, cur, qs[len(e.Stages)], n); err != nil {
		cancel(err)
	}
	wg.Wait()
	if cause := context.Cause(ctx); cause != nil {
		return zero, cause
	}
	return cur, nil
}

// source feeds mini-batch t once version t − S exists, with a snapshot of it.
func (e *Engine[P]) source(ctx context.Context, cancel context.CancelCauseFunc, vs *versions[P], out chan<- *Item[P], n int) {
	defer close(out)
	for t := range n {
		v := max(0, t-e.Staleness)
		p, newest, err := vs.wait(v)
		if err != nil {
			return
		}
		if e.OnRead != nil {
			e.OnRead(t, v, newest)
		}
		select {
		case out <- &Item[P]{T: t, V: v, Params: p}:
		case <-ctx.Done():
			return
		}
	}
}

func (e *Engine[P]) stage(ctx context.Context, cancel context.CancelCauseFunc, i int, st Stage[P], in <-chan *Item[P], out chan<- *Item[P]) {
	defer close(out)
	for it := range in {
		t0 := time.Now()
		if err := st(ctx, it); err != nil {
			cancel(fmt.Errorf("pipeline: stage %d, mini-batch %d: %w", i, it.T, err))
			return
		}
		if e.Times != nil {
			e.Times(i, time.Since(t0))
		}
		select {
		case out <- it:
		case <-ctx.Done():
			return
		}
	}
}

// update applies the updates in order of t and publishes each version.
func (e *Engine[P]) update(ctx context.Context, vs *versions[P], cur P, in <-chan *Item[P], n int) error {
	done := 0
	for it := range in {
		if it.T != done {
			return fmt.Errorf("pipeline: update of mini-batch %d arrived before %d", it.T, done)
		}
		t0 := time.Now()
		if err := e.Model.Apply(cur, it); err != nil {
			return fmt.Errorf("pipeline: update, mini-batch %d: %w", it.T, err)
		}
		if e.Times != nil {
			e.Times(len(e.Stages), time.Since(t0))
		}
		done++
		vs.publish(done, e.Model.Clone(cur), e.Staleness)
	}
	if done != n && ctx.Err() == nil {
		return fmt.Errorf("pipeline: %d of %d mini-batches updated", done, n)
	}
	return nil
}

func (vs *versions[P]) wait(v int) (P, int, error) {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	for vs.newest < v && vs.err == nil {
		vs.cond.Wait()
	}
	var zero P
	if vs.err != nil {
		return zero, 0, vs.err
	}
	return vs.snap[v], vs.newest, nil
}

// publish makes version v the newest and forgets those no mini-batch
// will read again (older than v − S).
func (vs *versions[P]) publish(v int, p P, s int) {
	vs.mu.Lock()
	vs.snap[v] = p
	vs.newest = v
	delete(vs.snap, v-s-1)
	vs.mu.Unlock()
	vs.cond.Broadcast()
}

func (vs *versions[P]) fail(err error) {
	vs.mu.Lock()
	if vs.err == nil {
		vs.err = err
	}
	vs.mu.Unlock()
	vs.cond.Broadcast()
}

// Seq is the sequential run under the same schedule: mini-batch t's
// stages run one after the other on version max(0, t − S), and updates
// apply in order. Engine.Run gives the same result.
func Seq[P any](ctx context.Context, m Model[P], stages []Stage[P], staleness int, p0 P, n int) (P, error) {
	hist := []P{m.Clone(p0)}
	cur := m.Clone(p0)
	for t := range n {
		v := max(0, t-staleness)
		it := &Item[P]{T: t, V: v, Params: hist[v]}
		for i, st := range stages {
			if err := st(ctx, it); err != nil {
				var zero P
				return zero, fmt.Errorf("pipeline: stage %d, mini-batch %d: %w", i, t, err)
			}
		}
		if err := m.Apply(cur, it); err != nil {
			var zero P
			return zero, err
		}
		hist = append(hist, m.Clone(cur))
	}
	return cur, nil
}
