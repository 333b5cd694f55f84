package agent

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// heal runs when this agent starts: it fetches from live peers the shards
// of the committed iteration that the placement gives it — its own rank's
// and those of the ranks it holds replicas for — so that a replacement
// agent restores the replication factor m by itself, without waiting for
// its trainer's restore (Gemini's recovery: the new machine is served its
// checkpoints by its group). A first start, with nothing committed
// anywhere, has nothing to fetch. Every copy is checked against the
// holder's commit record (XXH3) on its way in.
func (a *Agent) heal() {
	ctx, cancel := context.WithTimeout(a.ctx, 4*a.cfg.Timeout)
	defer cancel()
	invs := a.inventories(ctx)
	iter, epoch := int64(-1), int64(-1)
	for _, in := range invs {
		if in.err == nil && (in.committed > iter || (in.committed == iter && in.committedEpoch > epoch)) {
			iter, epoch = in.committed, in.committedEpoch
		}
	}
	if iter < 0 {
		return
	}
	where := holdersOf(invs, iter, epoch, a.cfg.World)
	for _, owner := range a.held() {
		if v := a.st.Get(owner, iter, epoch); v != nil {
			a.st.Unpin(v)
			continue
		}
		if err := a.fetchHeld(ctx, owner, iter, epoch, where[owner]); err != nil {
			a.log.Warn("could not fetch a shard this agent should hold: the next save replicates it again", "owner", owner, "iter", iter, "err", err)
		}
	}
}

// held lists the ranks whose shards this agent holds under the placement:
// its own first, then those it receives.
func (a *Agent) held() []int {
	out := []int{a.cfg.Rank}
	for o := 0; o < a.cfg.World; o++ {
		if o != a.cfg.Rank && slices.Contains(a.holders(o), a.cfg.Rank) {
			out = append(out, o)
		}
	}
	return out
}

// fetchHeld copies owner's shard of iter (epoch) from the first of from
// that serves it, and keeps it as a complete version.
func (a *Agent) fetchHeld(ctx context.Context, owner int, iter, epoch int64, from []int) error {
	var errs []error
	for _, r := range from {
		if r == a.cfg.Rank {
			continue
		}
		t0 := time.Now()
		b, in, err := a.fetch(ctx, r, owner, iter, epoch)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		v, err := a.st.Adopt(owner, iter, epoch, in.Len, in.XXH3, in.Format, b)
		if err != nil {
			b.Close()
			return err
		}
		a.st.Unpin(v)
		a.log.Info("fetched a shard this agent holds from a peer (replication factor restored)", "owner", owner, "iter", iter, "from", r,
			"bytes", in.Len, "elapsed", time.Since(t0).Round(time.Millisecond))
		return nil
	}
	return fmt.Errorf("no live holder served it (holders %v): %v", from, errs)
}
