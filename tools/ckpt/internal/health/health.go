// Package health is ckpt's failure detection on etcd: every agent keeps a
// key alive under a lease (its heartbeat); the agents elect one root
// (etcd's concurrency election); the root watches the keys, classifies
// each failure and publishes the recovery decision. If the root dies, its
// lease expires and another agent wins the election.
//
// Classification (Gemini §6): a rank whose key comes back from the same
// machine (a new process, before or after its old lease expired) is a
// software failure (recover from local memory, else the group); a rank
// whose key stays gone past the grace period, or comes back from another
// machine, is a hardware failure
// (the replacement takes the rank and fetches its shard from its group);
// if every holder of some rank's shard is down, the group is lost and
// every rank restores the same persistent iteration.
package health

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"

	"trainwire.dev/tools/ckpt/internal/placement"
)

// Config configures one agent's membership.
type Config struct {
	Endpoints   []string
	Run         string
	Rank, World int
	M           int
	// Machine identifies the machine (default: hostname + boot id).
	Machine string
	// TTL is the heartbeat lease's time to live (etcd's keep-alive renews
	// it every TTL/3); Grace how long the root waits for a vanished rank
	// to come back before it calls the failure a hardware one.
	TTL   time.Duration
	Grace time.Duration
	// Persistent, if set, returns the latest persisted iteration (for the
	// lost-group decision).
	Persistent func() (int64, error)
	// OnDecision, if set, is given every recovery decision of the run in
	// the order published: first those already published when Run starts,
	// then each new one as the root publishes it (WatchDecisions).
	OnDecision func(Decision)
	Log        *slog.Logger
}

// Member is what an agent registers.
type Member struct {
	Rank    int    `json:"rank"`
	Machine string `json:"machine"`
	PID     int    `json:"pid"`
	Since   int64  `json:"since_unix_ns"`
}

// Decision is what the root publishes under <prefix>decision/<n>.
type Decision struct {
	Seq        int64    `json:"seq"`
	Kind       string   `json:"kind"` // software, hardware, replaced, lost_group
	Ranks      []int    `json:"ranks"`
	Action     string   `json:"action"`
	Iter       int64    `json:"iter"` // lost_group: the persistent iteration every rank restores (-1: none)
	Root       int      `json:"root"`
	DownAt     int64    `json:"down_at_unix_ns"`    // when the root saw the key vanish
	DecidedAt  int64    `json:"decided_at_unix_ns"` // when it published this
	Machines   []string `json:"machines,omitempty"` // the machine each rank is back on
	DetectedMS float64  `json:"detected_ms"`        // DecidedAt − DownAt
}

// Prefix is the etcd key prefix of run.
func Prefix(run string) string { return "/trainwire/ckpt/" + run + "/" }

// DefaultMachine is hostname:boot-id.
func DefaultMachine() string {
	h, _ := os.Hostname()
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return h + ":" + strings.TrimSpace(string(b))
}

// NewClient connects to etcd.
func NewClient(endpoints []string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// Run registers the agent, campaigns for root and, while root, watches
// and decides. It returns when ctx is done; a lost session (etcd
// unreachable past the TTL) is retried.
func Run(ctx context.Context, cfg Config) error {
	if cfg.TTL <= 0 {
		cfg.TTL = 3 * time.Second
	}
	if cfg.Grace <= 0 {
		cfg.Grace = cfg.TTL
	}
	if cfg.Machine == "" {
		cfg.Machine = DefaultMachine()
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	cli, err := NewClient(cfg.Endpoints)
	if err != nil {
		return fmt.Errorf("etcd %v: %w", cfg.Endpoints, err)
	}
	defer cli.Close()
	if cfg.OnDecision != nil {
		done := make(chan struct{})
		defer func() { <-done }()
		go func() {
			defer close(done)
			WatchDecisions(ctx, cli, cfg.Run, cfg.OnDecision, cfg.Log)
		}()
	}
	for ctx.Err() == nil {
		if err := session(ctx, cli, cfg); err != nil && ctx.Err() == nil {
			cfg.Log.Warn("etcd session ended; re-registering", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
	return nil
}

func session(ctx context.Context, cli *clientv3.Client, cfg Config) error {
	sess, err := concurrency.NewSession(cli, concurrency.WithTTL(max(1, int(cfg.TTL.Seconds()))), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	defer sess.Close()
	p := Prefix(cfg.Run)
	me, _ := json.Marshal(Member{Rank: cfg.Rank, Machine: cfg.Machine, PID: os.Getpid(), Since: time.Now().UnixNano()})
	if _, err := cli.Put(ctx, p+"alive/"+strconv.Itoa(cfg.Rank), string(me), clientv3.WithLease(sess.Lease())); err != nil {
		return err
	}
	cfg.Log.Info("heartbeat registered in etcd", "lease_ttl", cfg.TTL, "machine", cfg.Machine)
	el := concurrency.NewElection(sess, p+"root")
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
			cancel()
		case <-sctx.Done():
		}
	}()
	if err := el.Campaign(sctx, strconv.Itoa(cfg.Rank)); err != nil {
		return err
	}
	cfg.Log.Info("elected root agent", "rank", cfg.Rank)
	defer func() {
		rctx, c := context.WithTimeout(context.Background(), time.Second)
		_ = el.Resign(rctx)
		c()
	}()
	return root(sctx, cli, cfg)
}

// rootState is the root's view of the members.
type rootState struct {
	mu          sync.Mutex
	ctx         context.Context
	cli         *clientv3.Client
	cfg         Config
	place       *placement.Placement
	alive       map[int]Member
	down        map[int]time.Time // rank → when its key vanished
	lastMachine map[int]string
	decided     map[int]string // rank → the kind decided while it is down
}

// root watches the alive keys until ctx ends.
func root(ctx context.Context, cli *clientv3.Client, cfg Config) error {
	m := cfg.M
	if m < 1 || m > cfg.World {
		m = 1
	}
	pl, err := placement.Plan(cfg.World, m)
	if err != nil {
		return err
	}
	p := Prefix(cfg.Run)
	rs := &rootState{ctx: ctx, cli: cli, cfg: cfg, place: pl, alive: map[int]Member{}, down: map[int]time.Time{}, lastMachine: map[int]string{}, decided: map[int]string{}}
	resp, err := cli.Get(ctx, p+"alive/", clientv3.WithPrefix())
	if err != nil {
		return err
	}
	now := time.Now()
	rs.mu.Lock()
	for _, kv := range resp.Kvs {
		var mb Member
		if json.Unmarshal(kv.Value, &mb) == nil && mb.Rank >= 0 && mb.Rank < cfg.World {
			rs.alive[mb.Rank] = mb
			rs.lastMachine[mb.Rank] = mb.Machine
		}
	}
	// Ranks already missing when this root took over (e.g. the old root
	// itself): treat them as vanished now.
	for r := 0; r < cfg.World; r++ {
		if _, ok := rs.alive[r]; !ok {
			rs.vanished(r, now)
		}
	}
	rs.mu.Unlock()
	wc := cli.Watch(ctx, p+"alive/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1), clientv3.WithPrevKV())
	for wr := range wc {
		if err := wr.Err(); err != nil {
			return err
		}
		rs.mu.Lock()
		for _, ev := range wr.Events {
			r, err := strconv.Atoi(strings.TrimPrefix(string(ev.Kv.Key), p+"alive/"))
			if err != nil || r < 0 || r >= cfg.World {
				continue
			}
			if ev.Type == clientv3.EventTypeDelete {
				delete(rs.alive, r)
				rs.vanished(r, time.Now())
				continue
			}
			var mb Member
			if json.Unmarshal(ev.Kv.Value, &mb) != nil {
				continue
			}
			prev, had := rs.alive[r]
			rs.alive[r] = mb
			if had && (prev.PID != mb.PID || prev.Since != mb.Since) {
				// Re-registered before its old lease expired: a restart.
				rs.down[r] = time.Unix(0, mb.Since)
			}
			rs.back(r, mb)
		}
		rs.mu.Unlock()
	}
	return ctx.Err()
}

// vanished: r's heartbeat expired. Decide after the grace period unless it
// comes back. Called with mu held.
func (rs *rootState) vanished(r int, at time.Time) {
	if _, ok := rs.down[r]; ok {
		return
	}
	rs.down[r] = at
	rs.cfg.Log.Warn("rank's heartbeat expired", "rank", r, "grace", rs.cfg.Grace)
	time.AfterFunc(rs.cfg.Grace, func() {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		if _, still := rs.down[r]; !still || rs.decided[r] != "" || rs.ctx.Err() != nil {
			return
		}
		// Lost group: some rank's holders are all down.
		var lost []int
		for o := 0; o < rs.cfg.World; o++ {
			all := true
			for _, h := range rs.place.Holders(o + 1) {
				if _, d := rs.down[h-1]; !d {
					all = false
				}
			}
			if all {
				lost = append(lost, o)
			}
		}
		if len(lost) > 0 {
			var ranks []int
			for d := range rs.down {
				if rs.decided[d] != "lost_group" {
					rs.decided[d] = "lost_group"
				}
				ranks = append(ranks, d)
			}
			sort.Ints(ranks)
			iter := int64(-1)
			action := "every holder of the shards of ranks " + fmt.Sprint(lost) + " is down: every rank restores the same persistent iteration"
			if rs.cfg.Persistent != nil {
				if it, err := rs.cfg.Persistent(); err == nil {
					iter = it
					action += fmt.Sprintf(" (%d)", it)
				} else {
					action += " (none available: " + err.Error() + ")"
				}
			}
			rs.publish(Decision{Kind: "lost_group", Ranks: ranks, Action: action, Iter: iter, DownAt: rs.down[r].UnixNano()})
			return
		}
		rs.decided[r] = "hardware"
		rs.publish(Decision{Kind: "hardware", Ranks: []int{r}, Iter: -1, DownAt: rs.down[r].UnixNano(),
			Action: fmt.Sprintf("rank %d's machine is gone: a replacement takes rank %d and fetches its shard from its group %v", r, r, rs.holders(r))})
	})
}

func (rs *rootState) holders(r int) []int {
	var out []int
	for _, h := range rs.place.Holders(r + 1) {
		if h-1 != r {
			out = append(out, h-1)
		}
	}
	return out
}

// back: r registered again. Called with mu held.
func (rs *rootState) back(r int, mb Member) {
	at, wasDown := rs.down[r]
	prev := rs.lastMachine[r]
	rs.lastMachine[r] = mb.Machine
	if !wasDown {
		return
	}
	delete(rs.down, r)
	kind := rs.decided[r]
	delete(rs.decided, r)
	switch {
	case kind == "lost_group":
		// Already told to use the persistent tier.
	case mb.Machine == prev:
		rs.publish(Decision{Kind: "software", Ranks: []int{r}, Iter: -1, DownAt: at.UnixNano(), Machines: []string{mb.Machine},
			Action: fmt.Sprintf("rank %d restarted on the same machine: recover from local memory (else from its group %v)", r, rs.holders(r))})
	default:
		rs.publish(Decision{Kind: "replaced", Ranks: []int{r}, Iter: -1, DownAt: at.UnixNano(), Machines: []string{mb.Machine},
			Action: fmt.Sprintf("rank %d is back on machine %s (was %s): it fetches its shard from its group %v", r, mb.Machine, prev, rs.holders(r))})
	}
}

// publish writes d under decision/<seq> (seq from etcd's revision).
func (rs *rootState) publish(d Decision) {
	d.Root = rs.cfg.Rank
	d.DecidedAt = time.Now().UnixNano()
	d.DetectedMS = float64(d.DecidedAt-d.DownAt) / 1e6
	p := Prefix(rs.cfg.Run)
	ctx, cancel := context.WithTimeout(rs.ctx, 5*time.Second)
	defer cancel()
	resp, err := rs.cli.Get(ctx, p+"decision/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err == nil {
		d.Seq = resp.Count + 1
		b, _ := json.Marshal(d)
		_, err = rs.cli.Txn(ctx).Then(clientv3.OpPut(fmt.Sprintf("%sdecision/%08d", p, d.Seq), string(b)), clientv3.OpPut(p+"decision-latest", string(b))).Commit()
	}
	if err != nil {
		rs.cfg.Log.Error("could not publish the recovery decision", "decision", d.Kind, "ranks", d.Ranks, "err", err)
		return
	}
	rs.cfg.Log.Warn("recovery decision", "kind", d.Kind, "ranks", d.Ranks, "action", d.Action, "iter", d.Iter, "since_heartbeat_expired", time.Duration(d.DecidedAt-d.DownAt))
}

// WatchDecisions gives fn every decision published for run, in order —
// those already published, then each new one — until ctx ends. If the
// watch breaks (etcd restarted, history compacted) it reads every
// decision again from the first: fn must take a replayed sequence (the
// agents' failed set is rebuilt the same way from it).
func WatchDecisions(ctx context.Context, cli *clientv3.Client, run string, fn func(Decision), log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := Prefix(run) + "decision/"
	for ctx.Err() == nil {
		resp, err := cli.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
		if err == nil {
			for _, kv := range resp.Kvs {
				deliver(kv.Value, fn, log)
			}
			wc := cli.Watch(ctx, p, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
			for wr := range wc {
				if err = wr.Err(); err != nil {
					break
				}
				for _, ev := range wr.Events {
					if ev.Type == clientv3.EventTypePut {
						deliver(ev.Kv.Value, fn, log)
					}
				}
			}
		}
		if ctx.Err() == nil {
			log.Warn("watch of the recovery decisions broke; reading them again", "err", err)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
		}
	}
}

func deliver(b []byte, fn func(Decision), log *slog.Logger) {
	var d Decision
	if err := json.Unmarshal(b, &d); err != nil {
		log.Warn("unreadable recovery decision in etcd skipped", "err", err)
		return
	}
	fn(d)
}

// Decisions reads every decision published for run, in order.
func Decisions(ctx context.Context, cli *clientv3.Client, run string) ([]Decision, error) {
	resp, err := cli.Get(ctx, Prefix(run)+"decision/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	var out []Decision
	for _, kv := range resp.Kvs {
		var d Decision
		if err := json.Unmarshal(kv.Value, &d); err == nil {
			out = append(out, d)
		}
	}
	return out, nil
}

// Leader returns the current root's rank, or -1.
func Leader(ctx context.Context, cli *clientv3.Client, run string) int {
	resp, err := cli.Get(ctx, Prefix(run)+"root", clientv3.WithFirstCreate()...)
	if err != nil || len(resp.Kvs) == 0 {
		return -1
	}
	r, err := strconv.Atoi(string(resp.Kvs[0].Value))
	if err != nil {
		return -1
	}
	return r
}

// Members returns the registered (alive) members of run.
func Members(ctx context.Context, cli *clientv3.Client, run string) ([]Member, error) {
	resp, err := cli.Get(ctx, Prefix(run)+"alive/", clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out []Member
	for _, kv := range resp.Kvs {
		var m Member
		if json.Unmarshal(kv.Value, &m) == nil {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	return out, nil
}
