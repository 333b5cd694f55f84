package agent

import (
	"context"
	"slices"
)

// Re-replication after a failure (Gemini's recovery while no replacement
// has joined; docs/ckpt.md, "Recovery protocol"). The root agent on etcd
// declares a rank failed (a hardware decision); every
// survivor records it and computes, from the set of failed ranks and the
// placement alone (placement.Extra), which temporary copies of the
// committed iteration's shards it must take so that every shard again has
// m copies among the live agents; it pulls each from a live holder,
// checked against the holder's commit record. Every survivor computes the
// same answer, and each one acts only on its own part of it.
//
// The temporary copies stay until a newer iteration commits (by then the
// replacement has joined and the new iteration has its m copies on the
// placement's holders): dropExtras frees them. A replacement agent that
// joins first fetches its own shards from whichever live agent holds them,
// temporary copies included (heal).

// Decision kinds of the root agent (internal/health) the agents act on. A
// lost group ("lost_group") is not one of them: every rank restores the
// persistent tier's iteration, and no copy in memory can help.
const (
	DecisionHardware = "hardware"
	DecisionReplaced = "replaced"
	DecisionSoftware = "software"
)

// OnDecision takes a recovery decision of the root agent: a rank declared
// failed (hardware) joins the failed set and wakes the re-replication, a
// rank back (replaced, software) leaves it. Decisions must be given in
// the order they were published. It never blocks.
func (a *Agent) OnDecision(kind string, ranks []int) {
	a.mu.Lock()
	for _, r := range ranks {
		if r < 0 || r >= a.cfg.World || r == a.cfg.Rank {
			continue // this agent is alive, whatever an old decision says
		}
		switch kind {
		case DecisionHardware:
			a.failed[r] = true
		case DecisionReplaced, DecisionSoftware:
			delete(a.failed, r)
		}
	}
	a.mu.Unlock()
	if kind == DecisionHardware {
		select {
		case a.rerep <- struct{}{}:
		default: // a run is already due: it will read the new failed set
		}
	}
}

// rereplicateLoop runs the re-replication each time a decision wakes it,
// until the agent stops.
func (a *Agent) rereplicateLoop() {
	for {
		select {
		case <-a.ctx.Done():
			return
		case <-a.rerep:
			a.rereplicate()
		}
	}
}

// extraOwners returns the ranks whose shards this agent must hold a
// temporary copy of while the ranks failed are down (placement.Extra).
func (a *Agent) extraOwners(failed []int) []int {
	dead := make([]int, len(failed))
	for i, r := range failed {
		dead[i] = r + 1
	}
	var out []int
	for m, to := range a.place.Extra(dead) {
		if slices.Contains(to, a.cfg.Rank+1) {
			out = append(out, m-1)
		}
	}
	slices.Sort(out)
	return out
}

// failedRanks is the failed set, sorted.
func (a *Agent) failedRanks() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []int
	for r := range a.failed {
		out = append(out, r)
	}
	slices.Sort(out)
	return out
}

// rereplicate takes this agent's temporary copies for the current failed
// set (those it does not hold yet). A holder that dies meanwhile only
// fails its own fetch: the next holder is tried, and its own failure
// decision runs the re-replication again with it counted as failed.
func (a *Agent) rereplicate() {
	failed := a.failedRanks()
	if len(failed) == 0 {
		return
	}
	owners := a.extraOwners(failed)
	a.log.Info("ranks declared failed: taking temporary copies so that every committed shard has m copies among live agents",
		"failed", failed, "copies_here", owners)
	if len(owners) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(a.ctx, 4*a.cfg.Timeout)
	defer cancel()
	a.fetchMissing(ctx, owners, "re-replicated a shard after a failure (temporary copy until a newer iteration commits)",
		"could not re-replicate a shard after a failure: it has fewer than m copies until a holder's replacement joins")
}

// dropExtras frees the temporary copies older than iter, now committed:
// the shards of ranks this agent does not hold under the placement.
func (a *Agent) dropExtras(iter int64) {
	held := a.held()
	seen := map[int]bool{}
	for _, in := range a.st.Inventory() {
		if slices.Contains(held, in.Owner) || seen[in.Owner] {
			continue
		}
		seen[in.Owner] = true
		if n := a.st.Drop(in.Owner, iter); n > 0 {
			a.log.Info("dropped a temporary copy: a newer iteration is committed", "owner", in.Owner, "committed", iter, "bytes", n)
		}
	}
}
