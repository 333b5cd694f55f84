package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/sched"
)

// Interleave configures traffic interleaving (§6.5): the remote replicas
// are cut by Algorithm 6.2 into chunks placed in the idle spans of the
// training traffic, which are given (Starts/Spans, e.g. from the
// profiler's trace) or measured online from the trainer's ticks.
type Interleave struct {
	// Starts and Spans are the idle spans of one iteration, in seconds
	// relative to its start; empty means: profile them online over the
	// first ProfileIters iterations (the trainer's ticks carry its comm
	// spans).
	Starts, Spans []float64
	ProfileIters  int
	// Bandwidth (bytes/s) and Alpha (s) model f(s) = α + s/B; Mu is the
	// share of each span used.
	Bandwidth, Alpha, Mu float64
}

// ticker is the trainer's iteration clock as the agent sees it.
type ticker struct {
	mu    sync.Mutex
	last  time.Time
	seq   int64
	next  chan struct{} // closed at the next tick
	iters [][]sched.Interval
	prof  *sched.Profile
}

func (t *ticker) init() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.next == nil {
		t.next = make(chan struct{})
	}
}

// base returns the start of the iteration whose idle spans a replication
// starting now goes into: the current one while its first span (start
// plus μ·length) is still ahead or under way, else the next one (waiting
// up to d for its tick; now if none comes).
func (t *ticker) base(ctx context.Context, firstEnd time.Duration, d time.Duration) time.Time {
	t.init()
	t.mu.Lock()
	last := t.last
	t.mu.Unlock()
	if !last.IsZero() && time.Since(last) < firstEnd {
		return last
	}
	return t.waitNext(ctx, d)
}

// waitNext returns the time of the next tick, or now after d.
func (t *ticker) waitNext(ctx context.Context, d time.Duration) time.Time {
	t.init()
	t.mu.Lock()
	ch := t.next
	t.mu.Unlock()
	select {
	case <-ch:
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.last
	case <-time.After(d):
	case <-ctx.Done():
	}
	return time.Now()
}

// trainerTick records the start of an iteration; its event frames are the
// previous iteration's communication spans (ts relative to that
// iteration's start, in ns), used for online profiling (C-RP-3).
func (a *Agent) trainerTick(cn *conn, meta map[string]string) error {
	frames, err := cn.rest()
	if err != nil {
		return err
	}
	a.recordTick(frames)
	return cn.send(map[string]string{kOp: "ok", kIter: meta[kIter]})
}

// recordTick notes an iteration's start and profiles the previous one.
func (a *Agent) recordTick(frames []wire.Frame) {
	now := time.Now()
	t := &a.tick
	t.init()
	t.mu.Lock()
	prev := t.last
	t.last = now
	t.seq++
	close(t.next)
	t.next = make(chan struct{})
	il := a.cfg.Interleave
	var done *sched.Profile
	if il != nil && len(il.Spans) == 0 && t.prof == nil && !prev.IsZero() {
		var busy []sched.Interval
		for _, f := range frames {
			if e, ok := f.(*wire.Event); ok && e.Cat == "comm" {
				busy = append(busy, sched.Interval{Start: float64(e.TS) / 1e9, End: float64(e.TS+e.Dur) / 1e9})
			}
		}
		t.iters = append(t.iters, sched.IdleIntervals(0, now.Sub(prev).Seconds(), busy))
		if len(t.iters) >= max(il.ProfileIters, 1) {
			if p, err := sched.AverageIntervals(t.iters); err == nil {
				t.prof, done = p, p
			}
		}
	}
	t.mu.Unlock()
	if done != nil {
		lvl := "stable"
		if !done.Stable() {
			lvl = "UNSTABLE (> 10%): the plan may not hold"
		}
		a.log.Info("idle spans profiled online", "iters", done.Iters, "starts_s", fmtF(done.Starts), "spans_s", fmtF(done.Spans), "norm_std", done.NormStd, "verdict", lvl)
	}
}

func fmtF(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.4g", x)
	}
	return strings.Join(s, ",")
}

// spans returns the idle spans to schedule into (nil: not known yet).
func (a *Agent) spans() (starts, lens []float64) {
	il := a.cfg.Interleave
	if il == nil {
		return nil, nil
	}
	if len(il.Spans) > 0 {
		return il.Starts, il.Spans
	}
	a.tick.mu.Lock()
	defer a.tick.mu.Unlock()
	if a.tick.prof == nil {
		return nil, nil
	}
	return a.tick.prof.Starts, a.tick.prof.Spans
}

// piece is one chunk to send: where in the shard, and when (span start
// relative to the iteration's start; negative: no constraint).
type piece struct {
	off, size int64
	at        time.Duration
}

// plan cuts a shard of size bytes for destination index dest: by
// Algorithm 6.2 when interleaving with known spans, else in chunks of R/p.
func (a *Agent) plan(size int64, dest int) []piece {
	starts, lens := a.spans()
	chunk := a.Chunk()
	if lens != nil && size > 0 {
		il := a.cfg.Interleave
		bc, s, err := sched.PartitionBytes(lens, sched.Params{Size: float64(size), Replicas: a.cfg.M, Buffer: float64(a.cfg.Buffer),
			Parts: a.cfg.Parts, Bandwidth: il.Bandwidth, Alpha: il.Alpha, Mu: il.Mu})
		if err == nil {
			if s.Overflow > 0 {
				a.log.Warn("the checkpoint does not fit in the idle spans: the rest goes in the last span and delays training; lower the checkpoint frequency", "overflow_bytes", int64(s.Overflow))
			}
			// Each chunk starts when the previous ones of its span would
			// have left the link (f(s) = α + s/B each): writing sooner only
			// fills socket buffers that drain into the training traffic.
			var out []piece
			used := map[int]float64{}
			for _, c := range bc {
				start := 0.0
				if c.Span < len(starts) {
					start = starts[c.Span]
				}
				at := time.Duration((start + used[c.Span]) * float64(time.Second))
				used[c.Span] += il.Alpha + float64(c.Size)/il.Bandwidth
				if c.Dest == dest {
					out = append(out, piece{off: c.Offset, size: c.Size, at: at})
				}
			}
			return out
		}
		a.log.Warn("interleaving disabled for this shard", "err", err)
	}
	var out []piece
	for off := int64(0); off < size; off += chunk {
		out = append(out, piece{off: off, size: min(chunk, size-off), at: -1})
	}
	if size == 0 {
		out = append(out, piece{at: -1})
	}
	return out
}
