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
	a.fetchMissing(ctx, a.held(), "fetched a shard this agent holds from a peer (replication factor restored)",
		"could not fetch a shard this agent should hold: the next save replicates it again")
}

// fetchMissing fetches, for each of owners, its shard of the newest
// committed iteration among the live agents, unless this agent holds it
// already; ok and fail are the log messages of a copy made or not.
func (a *Agent) fetchMissing(ctx context.Context, owners []int, ok, fail string) {
	invs := a.inventories(ctx)
	iter, epoch := newestCommitted(invs)
	if iter < 0 {
		return
	}
	where := holdersOf(invs, iter, epoch, a.cfg.World)
	for _, owner := range owners {
		if v := a.st.Get(owner, iter, epoch); v != nil {
			a.st.Unpin(v)
			continue
		}
		if err := a.fetchHeld(ctx, owner, iter, epoch, where[owner], ok); err != nil {
			a.log.Warn(fail, "owner", owner, "iter", iter, "err", err)
		}
	}
}

// newestCommitted is the newest committed iteration the live agents of
// invs report, and the epoch of its attempt (-1, -1: none).
func newestCommitted(invs []peerInventory) (iter, epoch int64) {
	iter, epoch = -1, -1
	for _, in := range invs {
		if in.err == nil && (in.committed > iter || (in.committed == iter && in.committedEpoch > epoch)) {
			iter, epoch = in.committed, in.committedEpoch
		}
	}
	return iter, epoch
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
// that serves it, and keeps it as a complete version; msg is what the log
// says of the copy.
func (a *Agent) fetchHeld(ctx context.Context, owner int, iter, epoch int64, from []int, msg string) error {
	release, land, err := a.claimFetch(ctx, shardKey{owner, iter, epoch}, nil)
	if release == nil {
		return err // held now: another fetch brought it, or ctx ended
	}
	got := -1
	defer func() { release(got) }()
	var errs []error
	for _, r := range from {
		if r == a.cfg.Rank {
			continue
		}
		t0 := time.Now()
		b, in, err := a.fetch(ctx, r, owner, iter, epoch, land)
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
		got = r
		a.log.Info(msg, "owner", owner, "iter", iter, "from", r,
			"bytes", in.Len, "elapsed", time.Since(t0).Round(time.Millisecond))
		return nil
	}
	return fmt.Errorf("no live holder served it (holders %v): %v", from, errs)
}

// claimFetch waits until no other fetch of k is in flight and returns
// release and the landing its fetch reports to when this caller is to
// fetch k itself, or nil with a nil error when the store holds k by then
// (the other fetch brought it), or nil with ctx's error. With a streamer,
// a fetch in flight is followed: the restore's trainer hears of its bytes
// as they land instead of after it ended.
func (a *Agent) claimFetch(ctx context.Context, k shardKey, s *streamer) (release func(from int), land *landing, err error) {
	for {
		release, wait, land := a.flights.claim(k)
		if release != nil {
			return release, land, nil
		}
		if s != nil {
			err = s.follow(ctx, land, wait)
		} else {
			select {
			case <-wait:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		if err != nil {
			return nil, nil, err
		}
		if v := a.st.Get(k.owner, k.iter, k.epoch); v != nil {
			a.st.Unpin(v)
			return nil, nil, nil
		}
	}
}
