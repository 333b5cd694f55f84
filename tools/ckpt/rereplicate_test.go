package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"trainwire.dev/tools/ckpt/internal/health"
	"trainwire.dev/tools/ckpt/internal/placement"
)

// copiesOf counts, for iteration iter, the live agents (ranks live) holding
// a complete copy of each rank's shard.
func (c *cluster) copiesOf(live []int, iter int64) map[int][]int {
	c.t.Helper()
	out := map[int][]int{}
	for _, r := range live {
		_, _, vs := c.status(r)
		for _, v := range vs {
			if v.Step == iter && v.Labels["state"] == "complete" {
				out[int(v.Rank)] = append(out[int(v.Rank)], r)
			}
		}
	}
	return out
}

// waitCopies waits (up to within) until every rank's shard of iter has at
// least m copies among live, and returns how long it took.
func (c *cluster) waitCopies(live []int, iter int64, m int, within time.Duration) time.Duration {
	c.t.Helper()
	t0 := time.Now()
	var have map[int][]int
	for {
		have = c.copiesOf(live, iter)
		short := false
		for o := 0; o < c.n; o++ {
			short = short || len(have[o]) < m
		}
		if !short {
			return time.Since(t0)
		}
		if time.Since(t0) > within {
			c.t.Fatalf("after %v, not every shard of iteration %d has %d copies among the live agents %v: holders %v", within, iter, m, live, have)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Issue 21 item 4, "the ckpt root acts": N=6, m=2 (groups {0,1} {2,3}
// {4,5}). A rank is killed (SIGKILL); as soon as the root declares it
// failed, one of the agents that must take a temporary copy of its
// group's shards is killed too, while it takes it. Within a deadline every
// committed shard again has m copies among the four live agents (their
// inventories say so). Replacements join and hold their shards, every
// rank restores iteration 1 byte-exact, and once iteration 2 commits the
// temporary copies are dropped.
func TestE2EEtcdRereplicate(t *testing.T) {
	const n, m = 6, 2
	ep := startEtcd(t)
	c := newCluster(t, n, "--m", "2", "--buffer", "1MiB", "--etcd", ep, "--heartbeat-ttl", "2s", "--grace", "1s")
	cli, err := health.NewClient([]string{ep})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	data := func(it int64) func(r int) []byte {
		return func(r int) []byte { return shard(r, it, 4<<20+r) }
	}
	c.saveCommitted(1, data(1))
	leader := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return health.Leader(ctx, cli, "e2e")
	}
	waitFor(t, "a root to be elected", func() bool { return leader() >= 0 })
	root := leader()
	pl, _ := placement.Plan(n, m)
	v1 := (root + 1) % n
	v2 := -1
	for _, to := range pl.Extra([]int{v1 + 1}) {
		for _, j := range to {
			if j-1 != root && v2 < 0 {
				v2 = j - 1
			}
		}
	}
	if v2 < 0 {
		t.Fatalf("no copy target of rank %d's failure other than the root %d", v1, root)
	}

	c.kill(v1)
	waitDecision(t, cli, 0, "hardware", v1)
	c.kill(v2)
	during := !strings.Contains(c.log(v2), "re-replicated a shard after a failure")
	t.Logf("root %d; rank %d killed; rank %d (a copy target) killed as soon as the root decided (before it finished its copies: %v)", root, v1, v2, during)
	waitDecision(t, cli, 0, "hardware", v2)
	var live []int
	for r := 0; r < n; r++ {
		if r != v1 && r != v2 {
			live = append(live, r)
		}
	}
	took := c.waitCopies(live, 1, m, 30*time.Second)
	t.Logf("every committed shard has %d copies among the live agents %v %v after the second failure decision", m, live, took.Round(time.Millisecond))

	// Replacements join on spare machines: each holds its placement's
	// shards (its own and those it receives), served by the survivors.
	// (The root's "replaced" decision is not waited for: under heavy load
	// the root's own lease may lapse, and a root that takes over with the
	// replacement already registered publishes none; the survivors take
	// the rank out of their failed set on its hello anyway.)
	for i, r := range []int{v1, v2} {
		c.mu.Lock()
		c.machine[r] = fmt.Sprintf("spare-%d", i)
		c.mu.Unlock()
		c.start(r, nil)
		want := []int{r}
		for _, o := range pl.Receives(r + 1) {
			want = append(want, o-1)
		}
		waitFor(t, fmt.Sprintf("rank %d's replacement to hold the shards of ranks %v", r, want), func() bool {
			have := c.copiesOf([]int{r}, 1)
			for _, o := range want {
				if len(have[o]) == 0 {
					return false
				}
			}
			return true
		})
	}
	c.restoreAll(1, data(1))

	// Iteration 2 commits: the temporary copies of iteration 1 go.
	c.saveCommitted(2, data(2))
	waitFor(t, "the temporary copies to be dropped", func() bool {
		for r := 0; r < n; r++ {
			held := append([]int{r}, pl.Receives(r+1)...)
			for i := 1; i < len(held); i++ {
				held[i]--
			}
			for o, hs := range c.copiesOf([]int{r}, 1) {
				if len(hs) > 0 && !slices.Contains(held, o) {
					return false
				}
			}
		}
		return true
	})
	c.restoreAll(2, data(2))
}
