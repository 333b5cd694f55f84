package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/safetensors"
	"trainwire.dev/tools/ckpt/internal/store"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// serveTrainer serves the local trainer's requests on one connection.
func (a *Agent) serveTrainer(c net.Conn) {
	cn := newConn(c, a.lim, a.cfg.Timeout, "trainer")
	var pending *store.Version // begun by "begin", finished by "commit"
	var held []*store.Version  // pinned for a shm restore until "release"
	var tmp []*store.Buffer
	defer func() {
		if pending != nil {
			a.st.Abort(pending)
		}
		for _, v := range held {
			a.st.Unpin(v)
		}
		for _, b := range tmp {
			b.Close()
		}
	}()
	for {
		meta, err := cn.header(0)
		if err != nil {
			if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "connection closed") {
				a.log.Warn("trainer sent garbage; connection closed, nothing committed was touched", "err", err)
				_ = cn.sendError("bad_input", err)
			}
			return
		}
		op := meta[kOp]
		var rerr error
		switch op {
		case "save":
			rerr = a.trainerSave(cn, meta)
		case "begin":
			if pending != nil {
				rerr = cn.sendError("bad_input", fmt.Errorf("begin of iteration %d while iteration %d is begun and not committed", mustInt(meta, kIter), pending.Iter))
				break
			}
			pending, rerr = a.trainerBegin(cn, meta)
		case "commit":
			if _, err := cn.rest(); err != nil {
				return
			}
			iter, err := metaInt(meta, kIter)
			if pending == nil || err != nil || iter != pending.Iter {
				rerr = cn.sendError("bad_input", fmt.Errorf("commit of iteration %s without a matching begin", meta[kIter]))
				break
			}
			v := pending
			pending = nil
			if err := cn.send(map[string]string{kOp: "ok", kIter: itoa(v.Iter), kLen: itoa(v.Len)}); err != nil {
				a.st.Abort(v)
				return
			}
			// The trainer may go on: the local replica is sealed (digest,
			// then commit record) and replicated in the background.
			a.startOwn(v, v.Iter, v.Epoch)
		case "restore":
			var hv *store.Version
			var tb *store.Buffer
			hv, tb, rerr = a.trainerRestore(cn, meta)
			if hv != nil {
				held = append(held, hv)
			}
			if tb != nil {
				tmp = append(tmp, tb)
			}
		case "release":
			if _, err := cn.rest(); err != nil {
				return
			}
			for _, v := range held {
				a.st.Unpin(v)
			}
			for _, b := range tmp {
				b.Close()
			}
			held, tmp = nil, nil
			rerr = cn.send(map[string]string{kOp: "ok"})
		case "status":
			if _, err := cn.rest(); err != nil {
				return
			}
			rerr = a.trainerStatus(cn)
		case "tick":
			rerr = a.trainerTick(cn, meta)
		case "comm":
			rerr = a.trainerComm(cn, meta)
		case "wait":
			// Wait until an iteration is committed (or fails).
			if _, err := cn.rest(); err != nil {
				return
			}
			rerr = a.trainerWait(cn, meta)
		default:
			_, _ = cn.rest()
			rerr = cn.sendError("bad_input", fmt.Errorf("unknown operation %q (want save, begin, commit, restore, release, status, wait, tick, comm)", op))
		}
		if rerr == errBadStream {
			return
		}
		if rerr != nil {
			a.log.Warn("trainer request failed", "op", op, "err", rerr)
			return
		}
	}
}

func mustInt(m map[string]string, k string) int64 { v, _ := metaInt(m, k); return v }

// waitPrevious makes a new save wait until the previous one is committed
// or will never be (its replication failed, or it was abandoned by a
// recovery), for at most d.
func (a *Agent) waitPrevious(d time.Duration) error {
	a.mu.Lock()
	o := a.own
	a.mu.Unlock()
	if o == nil {
		return nil
	}
	deadline := time.Now().Add(d)
	select {
	case <-o.settled:
	case <-time.After(d):
		return fmt.Errorf("the previous checkpoint (iteration %d) is still replicating after %v", o.iter, d)
	}
	for a.st.Committed() < o.iter {
		if a.ownErr(o) != nil {
			return nil // it will never commit, so it may be overwritten
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the previous checkpoint (iteration %d) is not globally committed after %v: ranks %v have not reported their shard complete (slow, or dead?)", o.iter, d, a.missingDone(o.iter))
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// ownErr returns o's failure or abandonment (nil while it may commit).
func (a *Agent) ownErr(o *attempt) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return o.err
}

func (a *Agent) missingDone(iter int64) []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []int
	for r := 0; r < a.cfg.World; r++ {
		if !a.done[iter][r] {
			out = append(out, r)
		}
	}
	return out
}

func (a *Agent) commitWait(meta map[string]string) time.Duration {
	if s, ok := meta[kWait]; ok {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return a.cfg.CommitWait
}

// trainerBegin reserves the in-progress buffer of this rank's slot and
// hands its shared-memory path to the trainer.
func (a *Agent) trainerBegin(cn *conn, meta map[string]string) (*store.Version, error) {
	if _, err := cn.rest(); err != nil {
		return nil, err
	}
	iter, e1 := metaInt(meta, kIter)
	size, e2 := metaInt(meta, kLen)
	if err := errors.Join(e1, e2); err != nil || size < 0 {
		return nil, cn.sendError("bad_input", fmt.Errorf("begin: %v", err))
	}
	format := meta[kFormat]
	if format == "" {
		format = FormatRaw
	}
	t0 := time.Now()
	if err := a.waitPrevious(a.commitWait(meta)); err != nil {
		return nil, cn.sendError("busy", err)
	}
	a.tl.event("begin", a.cfg.Rank, "iter", iter, "t0", t0, "t1", time.Now())
	v, err := a.st.Begin(a.cfg.Rank, iter, a.currentEpoch(), size, format, a.cfg.Timeout)
	if err != nil {
		return nil, cn.sendError("refused", err)
	}
	if err := cn.send(map[string]string{kOp: "ok", kIter: itoa(iter), kLen: itoa(size), kPath: v.Path()}); err != nil {
		a.st.Abort(v)
		return nil, err
	}
	return v, nil
}

// trainerSave takes a whole shard in the message: dense (or any data)
// frames, chunk frames of a safetensors file or raw bytes, or the path of
// a file in shared memory to read.
func (a *Agent) trainerSave(cn *conn, meta map[string]string) error {
	iter, err := metaInt(meta, kIter)
	if err != nil {
		_, _ = cn.rest()
		return cn.sendError("bad_input", fmt.Errorf("save: %v", err))
	}
	format := meta[kFormat]
	wait := a.commitWait(meta)
	var v *store.Version
	switch {
	case meta[kPath] != "":
		if _, err := cn.rest(); err != nil {
			return err
		}
		v, err = a.saveFile(meta[kPath], iter, format, wait)
	case format == FormatWire || format == "":
		v, err = a.saveFrames(cn, iter, wait)
	case format == FormatRaw || format == FormatSafetensors:
		v, err = a.saveChunks(cn, iter, format, wait)
	default:
		_, _ = cn.rest()
		err = badInput(fmt.Errorf("save: unknown format %q (want wire, safetensors or raw)", format))
	}
	if err != nil {
		code := "refused"
		var bi *badInputError
		if errors.As(err, &bi) {
			code = "bad_input"
		}
		a.log.Warn("save refused; nothing committed was touched", "iter", iter, "err", err)
		if strings.Contains(err.Error(), "exceeds the limit") {
			err = fmt.Errorf("%w (this agent takes frames of at most max(R/p, --memory) = %d bytes; --memory is %d)", err, a.lim.MaxPayload, a.cfg.Memory)
		}
		if serr := cn.sendError(code, err); serr != nil {
			return serr
		}
		if code == "bad_input" {
			return errBadStream
		}
		return nil
	}
	epoch, size := v.Epoch, v.Len
	if err := a.st.Seal(v, 0); err != nil {
		return cn.sendError("refused", err)
	}
	// Replicate even if the trainer is gone: the shard is sealed.
	a.startOwn(nil, iter, epoch)
	return cn.send(map[string]string{kOp: "ok", kIter: itoa(iter), kLen: itoa(size), kXXH3: hex(v.XXH3)})
}

// errBadStream closes a trainer connection whose stream cannot be read on.
var errBadStream = errors.New("bad stream")

type badInputError struct{ err error }

func (e *badInputError) Error() string { return e.err.Error() }
func (e *badInputError) Unwrap() error { return e.err }
func badInput(err error) error         { return &badInputError{err} }

// saveFrames re-encodes the message's data frames into a shard (a
// trainwire stream), bounded by the memory limit.
func (a *Agent) saveFrames(cn *conn, iter int64, wait time.Duration) (*store.Version, error) {
	var buf bytes.Buffer
	lw := &limitWriter{w: &buf, n: a.cfg.Memory}
	w := wire.NewWriterHeader(lw, wire.Header{Producer: "ckpt", Meta: map[string]string{kRank: itoa(int64(a.cfg.Rank)), kIter: itoa(iter)}})
	for {
		f, err := cn.next()
		if err != nil {
			return nil, badInput(err)
		}
		if _, ok := f.(*wire.End); ok {
			break
		}
		if err := w.Write(f); err != nil {
			// Drain the rest so the refusal reaches the trainer in order.
			if errors.Is(err, store.ErrTooBig) {
				if _, derr := drain(cn); derr != nil {
					return nil, derr
				}
			}
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if err := a.waitPrevious(wait); err != nil {
		return nil, err
	}
	v, err := a.st.Begin(a.cfg.Rank, iter, a.currentEpoch(), int64(buf.Len()), FormatWire, a.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	copy(v.Data(), buf.Bytes())
	return v, nil
}

func drain(cn *conn) (int, error) {
	n := 0
	for {
		f, err := cn.next()
		if err != nil {
			return n, err
		}
		if _, ok := f.(*wire.End); ok {
			return n, nil
		}
		n++
	}
}

// limitWriter refuses to grow past n bytes (0: no limit).
type limitWriter struct {
	w io.Writer
	n int64
	c int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 && l.c+int64(len(p)) > l.n {
		return 0, fmt.Errorf("shard larger than --memory (%d bytes): %w; nothing held was dropped", l.n, store.ErrTooBig)
	}
	l.c += int64(len(p))
	return l.w.Write(p)
}

// saveChunks writes the message's chunk frames (contiguous, CRC-checked)
// straight into the in-progress buffer.
func (a *Agent) saveChunks(cn *conn, iter int64, format string, wait time.Duration) (*store.Version, error) {
	f, err := cn.next()
	if err != nil {
		return nil, badInput(err)
	}
	if _, ok := f.(*wire.End); ok {
		f = &wire.Chunk{Iter: iter, ReplicaOf: int64(a.cfg.Rank)}
	}
	first, ok := f.(*wire.Chunk)
	if !ok {
		_, _ = drain(cn)
		return nil, badInput(fmt.Errorf("save in format %s: want chunk frames, got %s", format, f.Type()))
	}
	total := first.TotalLen
	if a.cfg.Memory > 0 && total > a.cfg.Memory {
		if _, err := drain(cn); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("a shard of %d bytes is larger than --memory (%d bytes): %w; nothing held was dropped", total, a.cfg.Memory, store.ErrTooBig)
	}
	if err := a.waitPrevious(wait); err != nil {
		_, _ = drain(cn)
		return nil, err
	}
	v, err := a.st.Begin(a.cfg.Rank, iter, a.currentEpoch(), total, format, a.cfg.Timeout)
	if err != nil {
		_, _ = drain(cn)
		return nil, err
	}
	data := v.Data()
	var next int64
	ch := first
	for {
		if ch.Offset != next || ch.TotalLen != total {
			a.st.Abort(v)
			_, _ = drain(cn)
			return nil, badInput(fmt.Errorf("chunk at offset %d (total %d), expected offset %d (total %d)", ch.Offset, ch.TotalLen, next, total))
		}
		copy(data[next:], ch.Data)
		next += ch.Len
		if first.Len == 0 && first.TotalLen == 0 && first.Data == nil {
			break // empty shard, end already read
		}
		f, err := cn.next()
		if err != nil {
			a.st.Abort(v)
			return nil, badInput(err)
		}
		if _, ok := f.(*wire.End); ok {
			break
		}
		if ch, ok = f.(*wire.Chunk); !ok {
			a.st.Abort(v)
			_, _ = drain(cn)
			return nil, badInput(fmt.Errorf("save: %s frame among chunks", f.Type()))
		}
	}
	if next != total {
		a.st.Abort(v)
		return nil, badInput(fmt.Errorf("save: %d of %d bytes arrived", next, total))
	}
	if format == FormatSafetensors {
		if _, err := safetensors.Parse(data[:total]); err != nil {
			a.st.Abort(v)
			return nil, badInput(err)
		}
	}
	return v, nil
}

// saveFile reads a file the trainer wrote in shared memory (e.g.
// /dev/shm/...) into the in-progress buffer.
func (a *Agent) saveFile(path string, iter int64, format string, wait time.Duration) (*store.Version, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, badInput(fmt.Errorf("save: %w", err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if a.cfg.Memory > 0 && size > a.cfg.Memory {
		return nil, fmt.Errorf("%s: a shard of %d bytes is larger than --memory (%d bytes): %w; nothing held was dropped", path, size, a.cfg.Memory, store.ErrTooBig)
	}
	if format == "" {
		format = FormatRaw
	}
	if err := a.waitPrevious(wait); err != nil {
		return nil, err
	}
	v, err := a.st.Begin(a.cfg.Rank, iter, a.currentEpoch(), size, format, a.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(f, v.Data()); err != nil {
		a.st.Abort(v)
		return nil, fmt.Errorf("save: reading %s: %w", path, err)
	}
	if err := validateShard(format, v.Data()); err != nil {
		a.st.Abort(v)
		return nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	return v, nil
}

func validateShard(format string, b []byte) error {
	switch format {
	case FormatSafetensors:
		_, err := safetensors.Parse(b)
		return err
	case FormatWire:
		r := wire.NewReader(bytes.NewReader(b), wire.Limits{MaxPayload: int64(len(b)) + 1})
		for {
			if _, err := r.NextFrame(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	return nil
}

// startOwn seals v (when not nil: the shared-memory path, sealed off the
// trainer's critical path) and replicates this rank's shard of iter,
// saved in epoch, to its m−1 peers in the background; when every peer has
// sealed its copy it tells every rank (the commit rule). A replication
// that fails for good aborts the iteration on every agent.
func (a *Agent) startOwn(v *store.Version, iter, epoch int64) {
	ctx, cancel := context.WithCancel(a.ctx)
	o := &attempt{iter: iter, epoch: epoch, settled: make(chan struct{}), cancel: cancel}
	a.mu.Lock()
	if epoch < a.epoch {
		o.err = &AbandonedError{Iter: iter, Why: a.why}
		cancel()
	}
	a.own = o
	a.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		defer cancel()
		err := a.replicateOwn(ctx, v, iter, epoch)
		a.mu.Lock()
		if o.err == nil {
			o.err = err
		}
		final := o.err
		a.mu.Unlock()
		close(o.settled)
		switch {
		case final == nil:
			a.notifyDone(a.ctx, iter, epoch)
		case abandoned(final):
			a.log.Warn("replication stopped: the iteration was abandoned", "iter", iter, "err", final)
		default:
			a.log.Warn("replication failed: this iteration will not be committed; the previous committed one stays", "iter", iter, "err", final)
			if a.ctx.Err() == nil {
				a.abort(iter, epoch, final)
			}
		}
	}()
}

func (a *Agent) replicateOwn(ctx context.Context, v *store.Version, iter, epoch int64) error {
	var crcs []uint32
	if v != nil {
		// One pass: the shard's digest (the commit record) and the CRC32C
		// of every R/p chunk the sends will cut.
		var sum uint64
		sum, crcs = hashGrid(v.Data(), a.Chunk())
		if err := a.st.SealHashed(v, sum, 0); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dests := a.sends()
	var base time.Time
	var seq int64
	if starts, lens := a.spans(); starts != nil {
		// The chunks go in the idle spans of this iteration if its first
		// span is still usable (the trainer saves right after its tick),
		// else of the next one.
		first := time.Duration((starts[0] + a.cfg.Interleave.Mu*lens[0]) * float64(time.Second))
		base, seq = a.tick.base(a.ctx, first, 10*time.Second)
		a.tl.event("plan", a.cfg.Rank, "iter", iter, "base", base, "seq", seq, "starts", fmt.Sprintf("%q", fmtF(starts)), "spans", fmt.Sprintf("%q", fmtF(lens)))
	}
	errs := make([]error, len(dests))
	done := make(chan int, len(dests))
	start := time.Now()
	for i, d := range dests {
		go func(i, d int) {
			defer func() { done <- i }()
			base := base
			for attempt := 0; attempt <= a.cfg.Retries; attempt++ {
				pv := a.st.Get(a.cfg.Rank, iter, epoch)
				if pv == nil {
					errs[i] = fmt.Errorf("iteration %d vanished from the local store", iter)
					return
				}
				err := a.sendReplica(ctx, d, pv, a.plan(pv.Len, i), base, seq, crcs)
				base = time.Time{} // a retry sends as fast as it can
				a.st.Unpin(pv)
				if err == nil {
					errs[i] = nil
					return
				}
				errs[i] = fmt.Errorf("to rank %d: %w", d, err)
				atomic.AddInt64(&a.stats.ReplicationsFailed, 1)
				if ctx.Err() != nil {
					return
				}
				var re *RemoteError
				if errors.As(err, &re) && re.Code == "abandoned" {
					return // the receiver has moved on: a retry cannot help
				}
				a.log.Warn("replication attempt failed", "iter", iter, "to", d, "attempt", attempt+1, "err", err)
			}
		}(i, d)
	}
	for range dests {
		<-done
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	a.log.Info("shard replicated", "iter", iter, "to", dests, "elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// trainerWait waits for an iteration's global commit.
func (a *Agent) trainerWait(cn *conn, meta map[string]string) error {
	iter, err := metaInt(meta, kIter)
	if err != nil {
		return cn.sendError("bad_input", err)
	}
	d := a.commitWait(meta)
	deadline := time.Now().Add(d)
	for a.st.Committed() < iter {
		a.mu.Lock()
		var ferr error
		if o := a.own; o != nil && o.iter == iter {
			ferr = o.err
		}
		a.mu.Unlock()
		if abandoned(ferr) {
			return cn.sendError("abandoned", ferr)
		}
		if ferr != nil {
			return cn.sendError("replication_failed", fmt.Errorf("iteration %d will not be committed: %v", iter, ferr))
		}
		if time.Now().After(deadline) {
			return cn.sendError("timeout", fmt.Errorf("iteration %d not committed after %v: ranks %v have not reported their shard complete", iter, d, a.missingDone(iter)))
		}
		time.Sleep(2 * time.Millisecond)
	}
	return cn.send(map[string]string{kOp: "ok", kCommitted: itoa(a.st.Committed())})
}

// trainerStatus reports the committed iteration, what is held, counters.
func (a *Agent) trainerStatus(cn *conn) error {
	used, limit := a.st.Used()
	meta := map[string]string{kOp: "status", kRank: itoa(int64(a.cfg.Rank)), "world": itoa(int64(a.cfg.World)), kCommitted: itoa(a.st.Committed()), kEpoch: itoa(a.currentEpoch()),
		"m": itoa(int64(a.cfg.M)), "strategy": a.place.Strategy, "sends_to": fmt.Sprint(a.sends()), "used": itoa(used), "memory": itoa(limit), "chunk": itoa(a.Chunk())}
	var frames []wire.Frame
	for _, in := range a.st.Inventory() {
		frames = append(frames, &wire.Stats{Tool: "ckpt", Name: "version", Step: in.Iter, Rank: int64(in.Owner),
			Values: map[string]float64{"len": float64(in.Len)}, Labels: map[string]string{"state": in.State, "format": in.Format, "xxh3": hex(in.XXH3), kAttempt: itoa(in.Epoch)}})
	}
	frames = append(frames, &wire.Stats{Tool: "ckpt", Name: "counters", Rank: int64(a.cfg.Rank), Values: map[string]float64{
		"bytes_sent": float64(atomic.LoadInt64(&a.stats.BytesSent)), "bytes_received": float64(atomic.LoadInt64(&a.stats.BytesReceived)),
		"chunks_sent": float64(atomic.LoadInt64(&a.stats.ChunksSent)), "chunks_received": float64(atomic.LoadInt64(&a.stats.ChunksRecv)),
		"crc_failures": float64(atomic.LoadInt64(&a.stats.CRCFailures)), "replications_failed": float64(atomic.LoadInt64(&a.stats.ReplicationsFailed)),
		"replications_ok": float64(atomic.LoadInt64(&a.stats.ReplicationsOK)),
	}})
	return cn.send(meta, frames...)
}

// trainerRestore rolls the job back to its newest committed iteration
// (every uncommitted attempt on every live agent is abandoned first, so
// that nothing newer can commit behind the restore's back), finds the
// iteration to restore (C-RC-1: the latest globally committed one whose
// every shard, of the attempt that was committed, has a live holder),
// then this rank's shard in local memory, else in a peer's, and hands it
// over. It returns what the trainer holds until "release".
func (a *Agent) trainerRestore(cn *conn, meta map[string]string) (*store.Version, *store.Buffer, error) {
	if _, err := cn.rest(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(a.ctx, 4*a.cfg.Timeout)
	defer cancel()
	// Round 1 learns the highest epoch among the live agents; round 2
	// moves every one of them past it before they report.
	a.inventories(ctx)
	a.advance(fmt.Sprintf("rank %d's trainer is restoring: the job rolls back to its last committed iteration", a.cfg.Rank))
	invs := a.inventories(ctx)
	var dead []string
	maxCommitted, maxEpoch := int64(-1), int64(-1)
	for _, in := range invs {
		if in.err != nil {
			dead = append(dead, fmt.Sprintf("rank %d (%v)", in.rank, in.err))
			continue
		}
		if in.committed > maxCommitted || (in.committed == maxCommitted && in.committedEpoch > maxEpoch) {
			maxCommitted, maxEpoch = in.committed, in.committedEpoch
		}
	}
	target, epoch := maxCommitted, maxEpoch
	if s, ok := meta[kIter]; ok && meta[kLatest] != "1" {
		it, err := metaInt(meta, kIter)
		if err != nil {
			return nil, nil, cn.sendError("bad_input", fmt.Errorf("restore: %v (%q)", err, s))
		}
		if it > maxCommitted {
			return nil, nil, cn.sendError("missing", fmt.Errorf("iteration %d is not committed (the latest committed iteration among live agents is %d); a partial checkpoint is never restored", it, maxCommitted))
		}
		if it < maxCommitted {
			epoch = fullEpoch(invs, it, a.cfg.World)
		}
		target = it
	}
	persistent := "falling back to persistent storage: none is configured (start the agents with --persistent DIR), so there is nothing to restore"
	if target < 0 {
		if a.cfg.Persistent != "" {
			return a.restorePersistent(cn, meta, fmt.Sprintf("no committed checkpoint in the memory of any live agent (unreachable: %s)", list(dead)))
		}
		return nil, nil, cn.sendError("missing", fmt.Errorf("no committed checkpoint in the memory of any live agent (unreachable: %s); %s", list(dead), persistent))
	}
	if epoch < 0 && target < maxCommitted {
		// An older iteration no live agent holds whole any more: evicted
		// by newer checkpoints (two versions per slot), not lost.
		if a.cfg.Persistent != "" {
			return a.restorePersistent(cn, meta, fmt.Sprintf("iteration %d is no longer held in CPU memory (evicted by newer checkpoints)", target))
		}
		return nil, nil, cn.sendError("missing", fmt.Errorf("iteration %d is no longer held in CPU memory (each agent keeps the committed iteration %d and the one in progress; older ones are evicted): restore it from the persistent tier (--from persistent)", target, maxCommitted))
	}
	// Every rank's shard of target must be on a live holder, or no rank
	// restores from memory (never mix iterations or attempts).
	where := holdersOf(invs, target, epoch, a.cfg.World)
	var lost []string
	for r, w := range where {
		if len(w) == 0 {
			lost = append(lost, fmt.Sprintf("rank %d (holders %v)", r, a.holders(r)))
		}
	}
	if len(lost) > 0 {
		if a.cfg.Persistent != "" {
			return a.restorePersistent(cn, meta, fmt.Sprintf("iteration %d cannot be recovered from CPU memory: no live agent holds the shard of %s", target, strings.Join(lost, ", ")))
		}
		return nil, nil, cn.sendError("lost", fmt.Errorf("iteration %d cannot be recovered from CPU memory: no live agent holds the shard of %s; unreachable: %s; every rank must restart from the same persistent iteration — %s",
			target, strings.Join(lost, ", "), list(dead), persistent))
	}
	if target == maxCommitted {
		a.learnCommitted(target, epoch, a.cfg.Rank)
	}
	me := a.cfg.Rank
	source := "local"
	var data []byte
	var sum uint64
	var format string
	var hv *store.Version
	var tb *store.Buffer
	if v := a.st.Get(me, target, epoch); v != nil {
		hv, data, sum, format = v, v.Data(), v.XXH3, v.Format
	} else {
		// Peer memory: a group member first, in placement order.
		cands := where[me]
		sort.SliceStable(cands, func(i, j int) bool { return a.isHolder(me, cands[i]) && !a.isHolder(me, cands[j]) })
		var errs []error
		for _, r := range cands {
			t0 := time.Now()
			b, in, err := a.fetch(ctx, r, me, target, epoch)
			if err == nil {
				d := time.Since(t0)
				a.log.Info("fetched this rank's shard from a peer", "iter", target, "from", r, "bytes", in.Len, "elapsed", d.Round(time.Millisecond),
					"MBps", int(float64(in.Len)/max(d.Seconds(), 1e-9)/1e6))
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			source = fmt.Sprintf("peer:%d", r)
			// Keep it: this agent holds its rank's shard again (the next
			// restore is local, and the slot can be re-replicated).
			if v, err := a.st.Adopt(me, target, epoch, in.Len, in.XXH3, in.Format, b); err == nil {
				hv, data, sum, format = v, v.Data(), v.XXH3, v.Format
			} else {
				a.log.Debug("fetched shard kept aside, not in the store", "err", err)
				tb, data, sum, format = b, b.Bytes()[:in.Len], in.XXH3, in.Format
			}
			break
		}
		if tb == nil && hv == nil {
			if a.cfg.Persistent != "" {
				return a.restorePersistent(cn, meta, fmt.Sprintf("iteration %d of rank %d: every holder failed to send it: %v", target, me, errors.Join(errs...)))
			}
			return nil, nil, cn.sendError("lost", fmt.Errorf("iteration %d of rank %d: every holder failed to send it: %v; %s", target, me, errors.Join(errs...), persistent))
		}
	}
	return a.handOver(cn, meta, target, maxCommitted, source, hv, tb, data, sum, format, source != "local")
}

// handOver checks the shard's digest and sends it to the trainer in the
// mode asked for.
//
// verified says data was hashed against sum on its way in (a fetch from a
// peer): it is not read again; a version held in memory is.
func (a *Agent) handOver(cn *conn, meta map[string]string, target, maxCommitted int64, source string, hv *store.Version, tb *store.Buffer, data []byte, sum uint64, format string, verified bool) (*store.Version, *store.Buffer, error) {
	me := a.cfg.Rank
	release := func() {
		if hv != nil {
			a.st.Unpin(hv)
		}
		if tb != nil {
			tb.Close()
		}
	}
	if !verified {
		if h := xxh3.Hash(data); h != sum {
			release()
			return nil, nil, cn.sendError("corrupt", fmt.Errorf("iteration %d of rank %d from %s: digest %016x, commit record says %016x; refusing to hand it over", target, me, source, h, sum))
		}
	}
	a.log.Info("restoring", "iter", target, "source", source, "bytes", len(data))
	rmeta := map[string]string{kOp: "ok", kIter: itoa(target), kLen: itoa(int64(len(data))), kXXH3: hex(sum), kFormat: format, kSource: source, kCommitted: itoa(maxCommitted)}
	switch meta[kMode] {
	case "shm":
		if hv != nil {
			rmeta[kPath] = hv.Path()
		} else {
			rmeta[kPath] = tb.Path()
		}
		// Held until "release" or the connection closes.
		return hv, tb, cn.send(rmeta)
	case "frames":
		if format == FormatSafetensors {
			ds, err := safetensors.Dense(data)
			if err != nil {
				release()
				return nil, nil, cn.sendError("bad_input", err)
			}
			w := cn.writer(rmeta)
			for _, d := range ds {
				cn.arm()
				if err := w.Write(d); err != nil {
					release()
					return nil, nil, err
				}
			}
			err = w.Close()
			release()
			if err != nil {
				return nil, nil, err
			}
			return nil, nil, cn.flush()
		}
		if format != FormatWire {
			release()
			return nil, nil, cn.sendError("bad_input", fmt.Errorf("iteration %d was saved as %s bytes, not tensors; restore it as bytes or through shared memory", target, format))
		}
		r := wire.NewReader(bytes.NewReader(data), wire.Limits{MaxPayload: int64(len(data)) + 1})
		w := cn.writer(rmeta)
		var err error
		for {
			var f wire.Frame
			if f, err = r.Next(); err != nil {
				break
			}
			if err = w.Write(f); err != nil {
				break
			}
		}
		release()
		if !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		if err := w.Close(); err != nil {
			return nil, nil, err
		}
		return nil, nil, cn.flush()
	default:
		pv := &store.Version{Owner: me, Iter: target, Len: int64(len(data))}
		err := sendBytes(cn, rmeta, pv, data, a.Chunk(), a.cfg.Run, me)
		release()
		return nil, nil, err
	}
}

func (a *Agent) isHolder(owner, r int) bool {
	for _, h := range a.holders(owner) {
		if h == r {
			return true
		}
	}
	return false
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

// sendBytes writes data as one message of chunk frames.
func sendBytes(cn *conn, meta map[string]string, v *store.Version, data []byte, chunk int64, job string, rank int) error {
	w := cn.writer(meta)
	for off := int64(0); off < int64(len(data)); off += chunk {
		n := min(chunk, int64(len(data))-off)
		b := data[off : off+n]
		cn.arm()
		if err := w.Write(&wire.Chunk{Job: job, Iter: v.Iter, SrcRank: int64(rank), ReplicaOf: int64(v.Owner), Offset: off, Len: n, TotalLen: int64(len(data)), CRC32C: wire.CRC32C(b), Data: b}); err != nil {
			return cn.wrap("send", err)
		}
	}
	if err := w.Close(); err != nil {
		return cn.wrap("send", err)
	}
	return cn.flush()
}

// fetch pulls owner's shard of iter from rank r into a new buffer and
// checks its digest.
func (a *Agent) fetch(ctx context.Context, r, owner int, iter, epoch int64) (*store.Buffer, store.Info, error) {
	cn, err := a.dial(ctx, r)
	if err != nil {
		return nil, store.Info{}, err
	}
	defer cn.Close()
	if err := cn.send(map[string]string{kOp: "fetch", kOwner: itoa(int64(owner)), kIter: itoa(iter), kAttempt: itoa(epoch)}); err != nil {
		return nil, store.Info{}, err
	}
	meta, err := cn.header(a.cfg.Timeout)
	if err != nil {
		return nil, store.Info{}, err
	}
	if meta[kOp] == "error" {
		_, _ = cn.rest()
		return nil, store.Info{}, &RemoteError{Who: cn.who, Code: meta[kCode], Msg: meta[kMsg]}
	}
	if _, err := cn.rest(); err != nil { // the header's message; the raw chunk records follow
		return nil, store.Info{}, err
	}
	size, e1 := metaInt(meta, kLen)
	sum, e2 := metaUint(meta, kXXH3)
	if err := errors.Join(e1, e2); err != nil || size < 0 {
		return nil, store.Info{}, fmt.Errorf("rank %d: bad shard header: %v", r, err)
	}
	if a.cfg.Memory > 0 && size > a.cfg.Memory {
		return nil, store.Info{}, fmt.Errorf("rank %d: shard of %d bytes exceeds --memory %d", r, size, a.cfg.Memory)
	}
	// A fresh buffer's pages cost about as much to allocate as the bytes
	// to receive (shmem, 4 KiB pages: ~1 GB/s here): allocate them in
	// another goroutine, ahead of the data, on the other core.
	b, err := store.NewBufferLazy(fmt.Sprintf("ckpt-restore-%d", iter), size)
	if err != nil {
		return nil, store.Info{}, err
	}
	popDone := make(chan struct{})
	var popStop atomic.Bool
	go func() {
		defer close(popDone)
		const step = 16 << 20
		for off := int64(0); off < size && !popStop.Load(); off += step {
			b.Populate(off, step)
		}
	}()

	// The chunks land straight in the buffer the trainer will map; each
	// slice is CRC32C-checked and hashed right after it arrived.
	rr := &rawReader{cn: cn, dst: b.Bytes()[:size], limit: max(a.Chunk(), 1<<20)}
	err = rr.Read()
	popStop.Store(true)
	<-popDone // before b can be closed
	if err != nil {
		b.Close()
		return nil, store.Info{}, err
	}
	if h := rr.Sum; h != sum {
		b.Close()
		return nil, store.Info{}, fmt.Errorf("rank %d: shard digest %016x, commit record %016x", r, h, sum)
	}
	return b, store.Info{Owner: owner, Iter: iter, Epoch: epoch, Len: size, XXH3: sum, Format: meta[kFormat]}, nil
}

// restorePersistent is recovery's last resort: every rank loads the same
// iteration, the latest the persistent catalog names (or the one asked
// for), checked against the catalog's digests.
func (a *Agent) restorePersistent(cn *conn, meta map[string]string, why string) (*store.Version, *store.Buffer, error) {
	iter := int64(-1)
	if meta[kLatest] != "1" {
		if it, err := metaInt(meta, kIter); err == nil {
			iter = it
		}
	}
	m, err := tier.Latest(a.cfg.Persistent, iter)
	if err != nil {
		return nil, nil, cn.sendError("lost", fmt.Errorf("%s; every rank must restart from the same persistent iteration, but the persistent tier %s has none: %v", why, a.cfg.Persistent, err))
	}
	data, s, err := tier.ReadShard(a.cfg.Persistent, m, a.cfg.Rank)
	if err != nil {
		return nil, nil, cn.sendError("corrupt", fmt.Errorf("%s; persistent iteration %d: %v", why, m.Iter, err))
	}
	b, err := store.NewBuffer(fmt.Sprintf("ckpt-persistent-%d", m.Iter), int64(len(data)))
	if err != nil {
		return nil, nil, cn.sendError("failed", err)
	}
	copy(b.Bytes(), data)
	a.log.Warn("recovering from the persistent tier", "why", why, "iter", m.Iter, "dir", a.cfg.Persistent)
	return a.handOver(cn, meta, m.Iter, m.Iter, fmt.Sprintf("persistent:%s", s.File), nil, b, b.Bytes()[:len(data)], s.XXH3, s.Format, false)
}
