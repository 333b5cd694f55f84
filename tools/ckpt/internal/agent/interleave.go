package agent

import (
	"context"
	"errors"
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

// ticker is the trainer's iteration clock and its training traffic as
// the agent sees them: ticks at every iteration's start, and (when the
// trainer reports them live) the start and end of every communication op.
type ticker struct {
	mu    sync.Mutex
	last  time.Time
	seq   int64
	next  chan struct{} // closed at the next tick
	iters [][]sched.Interval
	prof  *sched.Profile
	// lead is 1 when the profiled iterations start with a busy span (the
	// first idle span follows the first communication op), else 0.
	lead int

	// Live training traffic (the trainer's comm begin/end messages).
	live      bool      // the trainer reports its comm ops as they happen
	busy      int       // comm ops under way
	ends      int       // busy → idle transitions since the last tick
	idleSince time.Time // when the current idle span began (tick or the last comm's end)
	changed   chan struct{}
}

func (t *ticker) init() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.initLocked()
}

func (t *ticker) initLocked() {
	if t.next == nil {
		t.next = make(chan struct{})
	}
	if t.changed == nil {
		t.changed = make(chan struct{})
	}
}

// notifyLocked wakes every waiter on the ticker's state.
func (t *ticker) notifyLocked() {
	t.initLocked()
	close(t.changed)
	t.changed = make(chan struct{})
}

// base returns the start of the iteration whose idle spans a replication
// starting now goes into, and its tick number: the current one while its
// first span (start plus μ·length) is still ahead or under way, else the
// next one (waiting up to d for its tick; now if none comes).
func (t *ticker) base(ctx context.Context, firstEnd time.Duration, d time.Duration) (time.Time, int64) {
	t.init()
	t.mu.Lock()
	last, seq := t.last, t.seq
	t.mu.Unlock()
	if !last.IsZero() && time.Since(last) < firstEnd {
		return last, seq
	}
	return t.waitNext(ctx, d)
}

// waitNext returns the time of the next tick and its number, or the zero
// time after d.
func (t *ticker) waitNext(ctx context.Context, d time.Duration) (time.Time, int64) {
	t.init()
	t.mu.Lock()
	ch, seq := t.next, t.seq
	t.mu.Unlock()
	select {
	case <-ch:
		t.mu.Lock()
		defer t.mu.Unlock()
		return t.last, t.seq
	case <-time.After(d):
	case <-ctx.Done():
	}
	return time.Time{}, seq + 1 // no tick came (training over?): no schedule
}

// comm records a training communication op starting (begin) or ending.
func (t *ticker) comm(begin bool, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.live = true
	if begin {
		t.busy++
	} else if t.busy > 0 {
		t.busy--
		if t.busy == 0 {
			t.ends++
			t.idleSince = now
		}
	}
	t.notifyLocked()
}

// waitSpan blocks until idle span k of iteration seq has begun (the
// iteration's k-th comm op, k+1-th if it starts with one, has ended) and
// no training communication is under way; if the trainer does not report
// its comm ops live, until the planned absolute time. It gives up waiting
// after max (the trainer stopped, or lost a message) and returns
// errGaveUp: better late than never, the next save is waiting.
func (t *ticker) waitSpan(ctx context.Context, seq int64, k int, planned time.Time, max time.Duration) error {
	give := time.Now().Add(max)
	for {
		t.mu.Lock()
		t.initLocked()
		live, ch := t.live, t.changed
		var at time.Time
		ready := false
		after := k + t.lead
		switch {
		case !live:
			at, ready = planned, true
		case t.busy > 0:
		case t.seq > seq || (t.seq == seq && t.ends > after):
			// Late: this span is over, send at once (between comm ops).
			at, ready = time.Now(), true
		case t.seq == seq && t.ends == after:
			// The span is open: its chunks go back to back, as fast as
			// the (small) socket buffer drains into the link — they were
			// sized to fit μ·t at B, and finishing early leaves slack for
			// the next op's jitter.
			at, ready = t.idleSince, true
		}
		t.mu.Unlock()
		if ready { // live: now; not live: the planned time
			return sleepUntil(ctx, at)
		}
		if time.Now().After(give) {
			return errGaveUp
		}
		if err := waitChange(ctx, ch, give); err != nil {
			return err
		}
	}
}

// waitChange blocks until ch is closed (the ticker changed), the deadline
// passes or ctx is done (its error).
func waitChange(ctx context.Context, ch <-chan struct{}, deadline time.Time) error {
	tm := time.NewTimer(time.Until(deadline))
	defer tm.Stop()
	select {
	case <-ch:
	case <-tm.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// errGaveUp: the span a chunk waited for did not come in time.
var errGaveUp = errors.New("the idle span did not come")

// gate blocks while a training communication op is under way (up to max:
// a trainer that died mid-op must not stall replication for ever).
func (t *ticker) gate(ctx context.Context, max time.Duration) error {
	var give time.Time
	for {
		t.mu.Lock()
		t.initLocked()
		busy, ch := t.live && t.busy > 0, t.changed
		t.mu.Unlock()
		if !busy {
			return nil
		}
		if give.IsZero() {
			give = time.Now().Add(max)
		}
		if !time.Now().Before(give) {
			return nil
		}
		if err := waitChange(ctx, ch, give); err != nil {
			return err
		}
	}
}

// trainerComm records a training communication op's start or end, as it
// happens (op comm, phase begin|end). It has no answer: the trainer's
// critical path pays one write on a Unix socket.
func (a *Agent) trainerComm(cn *conn, meta map[string]string) error {
	if _, err := cn.rest(); err != nil {
		return err
	}
	now := time.Now()
	switch meta["phase"] {
	case "begin":
		a.tick.comm(true, now)
	case "end":
		a.tick.comm(false, now)
	default:
		// comm has no answer, so a refusal cannot pair with a request:
		// say why, then close the connection.
		err := fmt.Errorf("comm: phase %q, want begin or end", meta["phase"])
		_ = cn.sendError("bad_input", err)
		return err
	}
	a.tl.event("comm", a.cfg.Rank, "phase", fmt.Sprintf("%q", meta["phase"]), "t", now)
	return nil
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
	a.tl.event("tick", a.cfg.Rank, "t", now)
	t := &a.tick
	t.init()
	t.mu.Lock()
	prev := t.last
	t.last = now
	t.seq++
	t.ends, t.idleSince = 0, now
	close(t.next)
	t.next = make(chan struct{})
	t.notifyLocked()
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
				// Does the iteration start with a comm op? (Then idle span k
				// follows the (k+1)-th one.)
				t.lead = 0
				if len(p.Starts) > 0 && p.Starts[0] > 1e-3 {
					t.lead = 1
				}
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
	// span is the idle span the chunk goes into (-1: none).
	span int
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
					out = append(out, piece{off: c.Offset, size: c.Size, at: at, span: c.Span})
				}
			}
			return out
		}
		a.log.Warn("interleaving disabled for this shard", "err", err)
	}
	var out []piece
	for off := int64(0); off < size; off += chunk {
		out = append(out, piece{off: off, size: min(chunk, size-off), at: -1, span: -1})
	}
	return out
}
