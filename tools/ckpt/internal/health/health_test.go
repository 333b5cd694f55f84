package health

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"trainwire.dev/tools/ckpt/internal/etcdtest"
)

const run = "health-test"

// members runs health.Run for ranks of a world of 4 (m = 2: groups {0,1}
// {2,3}) against a real etcd, each in its own goroutine with its own
// client, as the agents do.
type members struct {
	t      *testing.T
	ep     string
	mu     sync.Mutex
	cancel map[int]func()
}

func (ms *members) start(r int, machine string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	cfg := Config{Endpoints: []string{ms.ep}, Run: run, Rank: r, World: 4, M: 2, Machine: machine,
		TTL: 2 * time.Second, Grace: 500 * time.Millisecond, Persistent: func() (int64, error) { return 7, nil }}
	go func() {
		defer close(done)
		_ = Run(ctx, cfg)
	}()
	ms.mu.Lock()
	ms.cancel[r] = func() { cancel(); <-done }
	ms.mu.Unlock()
}

// stop ends rank r's membership as a crash would: its session is gone
// and its key goes when the lease is revoked or expires.
func (ms *members) stop(r int) {
	ms.mu.Lock()
	c := ms.cancel[r]
	delete(ms.cancel, r)
	ms.mu.Unlock()
	c()
}

func (ms *members) stopAll() {
	for r := range 4 {
		ms.mu.Lock()
		_, ok := ms.cancel[r]
		ms.mu.Unlock()
		if ok {
			ms.stop(r)
		}
	}
}

// recorder collects what WatchDecisions delivers.
type recorder struct {
	mu sync.Mutex
	ds []Decision
}

func (rc *recorder) add(d Decision) {
	rc.mu.Lock()
	rc.ds = append(rc.ds, d)
	rc.mu.Unlock()
}

func (rc *recorder) get() []Decision {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.ds)
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitKind waits for the first decision of kind about every rank of ranks
// among the decisions after the first n delivered to rc.
func waitKind(t *testing.T, rc *recorder, n int, kind string, ranks ...int) Decision {
	t.Helper()
	var got Decision
	waitUntil(t, fmt.Sprintf("a %s decision about ranks %v", kind, ranks), func() bool {
		ds := rc.get()
		for _, d := range ds[min(n, len(ds)):] {
			all := d.Kind == kind
			for _, r := range ranks {
				all = all && slices.Contains(d.Ranks, r)
			}
			if all {
				got = d
				return true
			}
		}
		return false
	})
	return got
}

// The root's classification against a real etcd, as a watcher of the
// decisions sees it: a rank that stays gone is a hardware failure; back on
// another machine, replaced; back on the same machine, software; both
// holders of a group gone, a lost group naming the persistent iteration.
// Every decision is published once, in order, and a watcher started later
// is given the same sequence (replay).
func TestClassification(t *testing.T) {
	ep := etcdtest.Start(t)
	ms := &members{t: t, ep: ep, cancel: map[int]func(){}}
	defer ms.stopAll()
	cli, err := NewClient([]string{ep})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	rc := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go WatchDecisions(ctx, cli, run, rc.add, nil)
	for r := range 4 {
		ms.start(r, fmt.Sprintf("machine-%d", r))
	}
	root := -1
	waitUntil(t, "a root and four members", func() bool {
		root = Leader(ctx, cli, run)
		mb, _ := Members(ctx, cli, run)
		return root >= 0 && len(mb) == 4
	})
	v := (root + 2) % 4 // in the other group than the root
	ms.stop(v)
	d := waitKind(t, rc, 0, "hardware", v)
	if d.Root != root || len(d.Ranks) != 1 || !strings.Contains(d.Action, "replacement") || d.DecidedAt < d.DownAt {
		t.Fatalf("hardware decision %+v (root %d)", d, root)
	}
	n := len(rc.get())
	ms.start(v, "spare")
	d = waitKind(t, rc, n, "replaced", v)
	if !slices.Equal(d.Machines, []string{"spare"}) {
		t.Fatalf("replaced decision %+v", d)
	}
	n = len(rc.get())
	ms.stop(v)
	ms.start(v, "spare")
	waitKind(t, rc, n, "software", v)
	n = len(rc.get())
	g := []int{v, v ^ 1} // v's group: {0,1} or {2,3}
	ms.stop(g[0])
	ms.stop(g[1])
	d = waitKind(t, rc, n, "lost_group", g...)
	if d.Iter != 7 || !strings.Contains(d.Action, "persistent iteration (7)") {
		t.Fatalf("lost group decision %+v", d)
	}
	checkSequence(t, ctx, cli, rc.get())
}

// checkSequence checks that the decisions delivered are those published,
// in order, numbered 1, 2, …, and that a new watcher replays them all.
func checkSequence(t *testing.T, ctx context.Context, cli *clientv3.Client, got []Decision) {
	t.Helper()
	pub, err := Decisions(ctx, cli, run)
	if err != nil {
		t.Fatal(err)
	}
	kinds := func(ds []Decision) string {
		var s []string
		for i, d := range ds {
			if d.Seq != int64(i+1) {
				t.Errorf("decision %d has seq %d", i+1, d.Seq)
			}
			s = append(s, fmt.Sprint(d.Kind, d.Ranks))
		}
		return strings.Join(s, " ")
	}
	if kinds(got) != kinds(pub) {
		t.Fatalf("watched %s, published %s", kinds(got), kinds(pub))
	}
	late := &recorder{}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go WatchDecisions(wctx, cli, run, late.add, nil)
	waitUntil(t, "a late watcher's replay", func() bool { return len(late.get()) >= len(pub) })
	if kinds(late.get()) != kinds(pub) {
		t.Fatalf("replayed %s, published %s", kinds(late.get()), kinds(pub))
	}
	t.Logf("decisions: %s", kinds(pub))
}
