package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"trainwire.dev/tools/ckpt/internal/etcdtest"
	"trainwire.dev/tools/ckpt/internal/health"
)

// startEtcd starts a real etcd on loopback (internal/etcdtest).
func startEtcd(t *testing.T) string { return etcdtest.Start(t) }

func decisions(t *testing.T, cli *clientv3.Client) []health.Decision {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ds, err := health.Decisions(ctx, cli, "e2e")
	if err != nil {
		t.Logf("decisions: %v", err)
	}
	return ds
}

// waitDecision waits for a decision of kind about rank r after the first
// `after` decisions, and returns it.
func waitDecision(t *testing.T, cli *clientv3.Client, after int, kind string, r int) health.Decision {
	t.Helper()
	var got health.Decision
	waitFor(t, fmt.Sprintf("a %s decision about rank %d", kind, r), func() bool {
		ds := decisions(t, cli)
		for _, d := range ds[min(after, len(ds)):] {
			if d.Kind == kind && slices.Contains(d.Ranks, r) {
				got = d
				return true
			}
		}
		return false
	})
	return got
}

// C-RC-7, C-ARCH-2: heartbeats on etcd leases, one elected root that
// classifies failures; killing the root elects another and recovery
// completes; a restart on the same machine is a software failure; a lost
// group sends every rank to the same persistent iteration.
func TestE2EEtcdRoot(t *testing.T) {
	ep := startEtcd(t)
	dir := filepath.Join(t.TempDir(), "persistent")
	c := newCluster(t, 4, "--m", "2", "--buffer", "1MiB", "--etcd", ep, "--heartbeat-ttl", "2s", "--grace", "1s", "--persistent", dir)
	cli, err := health.NewClient([]string{ep})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	c.saveAll(1, allRanks(4), func(r int) []byte { return shard(r, 1, small) }, "--format", "raw")
	for r := 0; r < 4; r++ {
		c.waitCommitted(r, 1)
	}
	c.persist(dir)
	leader := func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return health.Leader(ctx, cli, "e2e")
	}
	waitFor(t, "a root to be elected", func() bool { return leader() >= 0 })
	old := leader()

	// Kill the root: another is elected, detects the old root's failure
	// (hardware: it stays gone), and a replacement on a spare machine
	// recovers its shard from its group.
	killed := time.Now()
	c.kill(old)
	waitFor(t, "a new root", func() bool { l := leader(); return l >= 0 && l != old })
	d := waitDecision(t, cli, 0, "hardware", old)
	t.Logf("root %d killed: new root %d decided %q in %v after the kill (%.0f ms after the heartbeat expired)",
		old, d.Root, d.Kind, time.Unix(0, d.DecidedAt).Sub(killed).Round(time.Millisecond), d.DetectedMS)
	if d.Root == old || !strings.Contains(d.Action, "fetches its shard from its group") {
		t.Fatalf("decision %+v", d)
	}
	n := len(decisions(t, cli))
	c.mu.Lock()
	c.machine[old] = "spare-machine"
	c.mu.Unlock()
	c.start(old, nil)
	waitDecision(t, cli, n, "replaced", old)
	c.restoreReplacement(old, shard(old, 1, small), 1)

	// A restart on the same machine: software.
	sw := (old + 2) % 4
	if sw == leader() {
		sw = (sw + 1) % 4
	}
	n = len(decisions(t, cli))
	c.kill(sw)
	c.start(sw, nil)
	waitDecision(t, cli, n, "software", sw)

	// A whole group (two ranks holding each other's shards) lost: every
	// rank is told the same persistent iteration.
	root := leader()
	g := []int{0, 1}
	if root <= 1 {
		g = []int{2, 3}
	}
	n = len(decisions(t, cli))
	c.kill(g[0])
	c.kill(g[1])
	d = waitDecision(t, cli, n, "lost_group", g[1])
	if d.Iter != 1 {
		t.Fatalf("lost group decision without the persistent iteration: %+v", d)
	}
	for r := 0; r < 4; r++ {
		if !slices.Contains(g, r) {
			c.restore(r, shard(r, 1, small), 1, "from persistent storage")
		}
	}
	out, stderr, code := c.tool("health", "--etcd", ep, "--run-id", "e2e")
	if code != 0 || !strings.Contains(out, fmt.Sprintf("root agent rank %d; 2 agents alive", root)) || !strings.Contains(out, "lost_group") {
		t.Fatalf("ckpt health: exit %d\n%s%s", code, out, stderr)
	}
}
