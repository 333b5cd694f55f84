package agent

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"trainwire.dev/tools/ckpt/internal/store"
)

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
