package agent

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
)

// Recovery epochs (docs/ckpt.md, "Recovery protocol").
//
// Every agent keeps an epoch, a counter that only grows and spreads by
// gossip: every message between agents carries the sender's epoch and its
// incarnation (a random number drawn when the agent process starts), and
// the receiver adopts a higher epoch. A save attempt is tagged with the
// epoch in which its shard was begun, and so is each version in the store
// and each "done" report; an agent counts only the reports of its current
// epoch towards a commit, and a commit names the epoch it counted. The
// epoch moves on (is "advanced") when an attempt in flight can no longer
// commit:
//
//   - a rank's replication failed for good (its receiver died or kept
//     corrupting chunks): the sender advances and tells every agent
//     ("abort"), so nobody waits for an iteration that cannot commit;
//   - an agent hears from a rank whose incarnation changed: a replacement
//     agent took a dead one's place (it announces itself when it starts),
//     and everything the dead one held is gone;
//   - a trainer restores: it rolls the job back to the newest committed
//     iteration, so every uncommitted attempt is abandoned on every live
//     agent before the restore picks that iteration.
//
// Advancing abandons, on that agent, its own uncommitted attempt (its
// waiters fail at once, naming the reason, and its next save may start)
// and every report towards an uncommitted iteration. A shard saved again
// after the rollback carries the new epoch, so it can never be counted
// together with a report or a replica of the attempt before the failure:
// a checkpoint is committed from one attempt of every rank, or not at all.

// Meta keys of the recovery protocol.
const (
	kInc            = "inc"             // the sender's incarnation (hex)
	kEpoch          = "epoch"           // the sender's current epoch
	kAttempt        = "attempt"         // the epoch of the save attempt a shard belongs to
	kCommittedEpoch = "committed_epoch" // the epoch of the committed iteration's attempt
	kWhy            = "why"             // why the sender advanced its epoch
)

// attempt is this rank's latest save: its replication and commit.
type attempt struct {
	iter, epoch int64
	// settled is closed when the replication has finished, well or not.
	settled chan struct{}
	// err is the replication's failure or the attempt's abandonment.
	err    error
	cancel context.CancelFunc
}

// AbandonedError says an iteration will never be committed because the job
// moved on to a new recovery epoch.
type AbandonedError struct {
	Iter int64
	Why  string
}

func (e *AbandonedError) Error() string {
	return fmt.Sprintf("iteration %d was abandoned and will not be committed: %s; the last committed iteration stays", e.Iter, e.Why)
}

// newIncarnation draws this process's incarnation (never 0).
func newIncarnation() uint64 {
	var b [8]byte
	for {
		_, _ = rand.Read(b[:])
		if v := binary.LittleEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// stamp adds the recovery state to a message to a peer.
func (a *Agent) stamp(meta map[string]string) {
	c, ce := a.st.CommittedAt()
	a.mu.Lock()
	meta[kInc] = hex(a.inc)
	meta[kEpoch] = itoa(a.epoch)
	a.mu.Unlock()
	meta[kCommitted] = itoa(c)
	meta[kCommittedEpoch] = itoa(ce)
}

// observe takes the recovery state from a message of rank from: a new
// incarnation or a higher epoch advances this agent's epoch, and the
// committed iteration it reports is learned.
func (a *Agent) observe(from int, meta map[string]string) {
	inc, ierr := metaUint(meta, kInc)
	ep, eerr := metaInt(meta, kEpoch)
	if ierr != nil || eerr != nil || inc == 0 {
		return // not an agent (ckpt persist's client), or an old one
	}
	a.mu.Lock()
	old := a.incs[from]
	a.incs[from] = inc
	switch {
	case old != 0 && old != inc:
		delete(a.failed, from) // back, whatever the root has published yet
		a.advanceLocked(max(a.epoch, ep)+1, fmt.Sprintf("rank %d's agent was replaced (it restarted with empty memory)", from))
	case ep > a.epoch:
		why := meta[kWhy]
		if why == "" {
			why = fmt.Sprintf("rank %d moved to recovery epoch %d", from, ep)
		}
		a.advanceLocked(ep, why)
	}
	a.mu.Unlock()
	if c, err := metaInt(meta, kCommitted); err == nil && c >= 0 {
		ce, _ := metaInt(meta, kCommittedEpoch)
		a.learnCommitted(c, ce, from)
	}
}

// advanceLocked moves to epoch e (a.mu held): this rank's uncommitted
// attempt and every report towards an uncommitted iteration are
// abandoned.
func (a *Agent) advanceLocked(e int64, why string) {
	if e <= a.epoch {
		return
	}
	a.epoch, a.why = e, why
	a.done = map[int64]map[int]bool{}
	committed := a.st.Committed()
	a.log.Warn("recovery epoch advanced: uncommitted iterations are abandoned", "epoch", e, "why", why, "committed", committed)
	if o := a.own; o != nil && o.err == nil && o.epoch < e && o.iter > committed {
		o.err = &AbandonedError{Iter: o.iter, Why: why}
		o.cancel()
	}
}

// advance is advanceLocked for a caller without a.mu; it returns the new
// epoch.
func (a *Agent) advance(why string) int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.advanceLocked(a.epoch+1, why)
	return a.epoch
}

// currentEpoch returns this agent's epoch.
func (a *Agent) currentEpoch() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.epoch
}

// learnCommitted raises the committed iteration from a peer's word.
func (a *Agent) learnCommitted(iter, epoch int64, from int) {
	if a.st.SetCommitted(iter, epoch) {
		a.log.Debug("committed iteration learned from a peer", "iter", iter, "epoch", epoch, "from", from)
		a.dropExtras(iter)
	}
}

// abort tells every agent that this rank's shard of iter (saved in epoch)
// cannot be replicated, so the iteration cannot commit: this agent
// advances its epoch and every agent it reaches follows.
func (a *Agent) abort(iter, epoch int64, cause error) {
	why := fmt.Sprintf("rank %d's replication of iteration %d failed: %v", a.cfg.Rank, iter, cause)
	a.mu.Lock()
	if a.epoch == epoch {
		a.advanceLocked(epoch+1, why)
	}
	a.mu.Unlock()
	a.broadcast(a.ctx, map[string]string{kOp: "abort", kIter: itoa(iter), kWhy: why}, a.debugUntold("abort"))
}

// announce tells every peer that this agent (a new incarnation) serves
// rank cfg.Rank: a peer that knew an earlier one abandons what can no
// longer commit, and this agent learns the job's epoch and committed
// iteration from the answers.
func (a *Agent) announce() {
	a.broadcast(a.ctx, map[string]string{kOp: "hello"}, a.debugUntold("hello"))
}

func (a *Agent) debugUntold(what string) func(int, error) {
	return func(r int, err error) { a.log.Debug("peer not told", "what", what, "rank", r, "err", err) }
}

// broadcast sends the one-message request meta to every other agent in
// parallel and reads each answer; failed(r, err) is called for each peer
// that could not be told.
func (a *Agent) broadcast(ctx context.Context, meta map[string]string, failed func(r int, err error)) {
	var wg sync.WaitGroup
	for r := 0; r < a.cfg.World; r++ {
		if r == a.cfg.Rank {
			continue
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			if err := a.request(ctx, r, maps.Clone(meta)); err != nil {
				failed(r, err)
			}
		}(r)
	}
	wg.Wait()
}

// request sends meta to rank r and waits for its answer.
func (a *Agent) request(ctx context.Context, r int, meta map[string]string) error {
	cn, err := a.dial(ctx, r)
	if err != nil {
		return err
	}
	defer cn.Close()
	if err := cn.send(meta); err != nil {
		return err
	}
	_, _, err = cn.recv(a.cfg.Timeout)
	return err
}

// abandoned reports whether err is an abandonment.
func abandoned(err error) bool {
	var ae *AbandonedError
	return errors.As(err, &ae)
}

func metaEpoch(m map[string]string, k string) int64 {
	v, err := strconv.ParseInt(m[k], 10, 64)
	if err != nil {
		return -1
	}
	return v
}

// holdersOf lists, for every rank, the live agents that hold its shard of
// iter saved in epoch.
func holdersOf(invs []peerInventory, iter, epoch int64, world int) [][]int {
	where := make([][]int, world)
	for _, in := range invs {
		if in.err != nil {
			continue
		}
		for _, v := range in.versions {
			if v.Iter == iter && v.Epoch == epoch && v.Owner >= 0 && v.Owner < world {
				where[v.Owner] = append(where[v.Owner], in.rank)
			}
		}
	}
	return where
}

// fullEpoch returns the newest epoch in which every rank's shard of iter
// is held by a live agent, or -1: the attempt an older committed
// iteration was committed from (a later attempt always has a higher
// epoch).
func fullEpoch(invs []peerInventory, iter int64, world int) int64 {
	seen := map[int64]map[int]bool{}
	for _, in := range invs {
		if in.err != nil {
			continue
		}
		for _, v := range in.versions {
			if v.Iter != iter || v.Owner < 0 || v.Owner >= world {
				continue
			}
			if seen[v.Epoch] == nil {
				seen[v.Epoch] = map[int]bool{}
			}
			seen[v.Epoch][v.Owner] = true
		}
	}
	best := int64(-1)
	for e, owners := range seen {
		if len(owners) == world && e > best {
			best = e
		}
	}
	return best
}
