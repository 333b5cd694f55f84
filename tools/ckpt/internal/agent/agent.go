// Package agent is ckpt's worker agent: one per rank, it holds checkpoint
// replicas in memory (internal/store), receives its trainer's state on a
// local Unix socket, replicates it to the peers Algorithm 6.1 names in
// chunks under credit-based flow control, tracks the global commit
// (C-RC-1), and serves restores from local memory, then peer memory.
//
// Agents talk to each other over their own TCP connections (not lib/mesh,
// whose ranks all abort when one dies): one connection per operation,
// authenticated with the mesh's HMAC challenge-response, with a deadline on
// every read and write, and errors naming the rank.
package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/placement"
	"trainwire.dev/tools/ckpt/internal/store"
)

// Config is an agent's configuration.
type Config struct {
	// Rank and World place this agent; Peers[r] is rank r's agent address
	// (host:port); Peers[Rank] is where this agent listens.
	Rank, World int
	Peers       []string
	// Socket is the Unix socket the trainer talks to.
	Socket string
	// M is the number of replicas (Algorithm 6.1's m), the local one
	// included.
	M int
	// Memory bounds the bytes of replica buffers this agent holds.
	Memory int64
	// Buffer is R, the receive buffer for checkpoint traffic, and Parts p:
	// chunks are at most R/p and a receiver grants p credits.
	Buffer int64
	Parts  int
	// Token is the job token; Run the run id bound into the handshake.
	Token []byte
	Run   string
	// Timeout bounds every read, write and dial; CommitWait how long a
	// save waits for the previous checkpoint's global commit.
	Timeout    time.Duration
	CommitWait time.Duration
	// Retries is how many times a failed replication is retried.
	Retries int
	// Pace, if set, is called before each chunk sent to a peer (traffic
	// interleaving); it may sleep. Nil sends as fast as credits allow.
	Pace func(ctx context.Context, dest int, offset, size int64) error
	// Interleave, if set, schedules replication into the training
	// traffic's idle spans (Algorithm 6.2).
	Interleave *Interleave
	// Persistent, if set, is the persistent tier's directory: recovery
	// falls back to its latest catalogued iteration when CPU memory cannot
	// serve every rank.
	Persistent string
	// CheckOnRestore hashes a restored shard at every restore, even when
	// it was checked at rest since the last process that could write it
	// exited (see atRest).
	CheckOnRestore bool
	// Timeline, if set, receives one JSON line per tick and per chunk
	// sent or received, with absolute times (Unix ns): the replication
	// traffic's timeline, to lay against the trainer's.
	Timeline io.Writer
	Log      *slog.Logger
}

// Agent is one rank's agent.
type Agent struct {
	cfg   Config
	place *placement.Placement
	st    *store.Store
	log   *slog.Logger
	lim   wire.Limits

	// passive agents (ckpt persist's client) take no part in the
	// recovery protocol: they stamp nothing on their messages.
	passive bool

	mu sync.Mutex
	// inc is this process's incarnation; incs the last one heard from
	// each rank; epoch the recovery epoch and why the last advance.
	inc   uint64
	incs  map[int]uint64
	epoch int64
	why   string
	// done[iter] is the set of ranks whose shard of iter, saved in the
	// current epoch, is complete on every holder.
	done map[int64]map[int]bool
	// own is this rank's latest save attempt (nil: none yet).
	own *attempt
	// failed are the ranks the root declared failed (hardware) and that
	// have not come back; rerep wakes the re-replication worker.
	failed map[int]bool
	rerep  chan struct{}
	stats  Stats
	tick   ticker
	tl     *timeline

	// flights: one copy of a shard from the peers at a time (heal and a
	// trainer's restore want the same one as a replacement starts).
	flights flights
	// rest: writers alive, and the check of this rank's shard at rest.
	rest atRest

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Stats are counters an agent reports in its status.
type Stats struct {
	BytesSent, BytesReceived int64
	ChunksSent, ChunksRecv   int64
	CRCFailures              int64
	ReplicationsFailed       int64
	ReplicationsOK           int64
	// CheckedAtRest counts restores whose digest came from the check
	// made after the shard's last writer exited.
	CheckedAtRest int64
}

// New checks cfg and returns an agent (not yet serving).
func New(cfg Config) (*Agent, error) {
	if cfg.World < 1 || cfg.Rank < 0 || cfg.Rank >= cfg.World {
		return nil, fmt.Errorf("agent: rank %d of world %d", cfg.Rank, cfg.World)
	}
	if len(cfg.Peers) != cfg.World {
		return nil, fmt.Errorf("agent: %d peer addresses for a world of %d (give one host:port per rank, rank order)", len(cfg.Peers), cfg.World)
	}
	if len(cfg.Token) == 0 {
		for r, addr := range cfg.Peers {
			if !loopback(addr) {
				return nil, fmt.Errorf("agent: rank %d's address %s is not loopback: set a job token (--token / TRAINWIRE_TOKEN) so that agents authenticate each other", r, addr)
			}
		}
	}
	if cfg.M < 1 {
		cfg.M = 1
	}
	if cfg.M > cfg.World {
		return nil, fmt.Errorf("agent: m = %d replicas need at least %d ranks (world is %d)", cfg.M, cfg.M, cfg.World)
	}
	p, err := placement.Plan(cfg.World, cfg.M)
	if err != nil {
		return nil, err
	}
	if cfg.Parts < 1 {
		cfg.Parts = 4
	}
	if cfg.Buffer <= 0 {
		cfg.Buffer = 128 << 20
	}
	if cfg.Buffer/int64(cfg.Parts) > 1<<30 {
		return nil, fmt.Errorf("agent: chunks of R/p = %d bytes (--buffer %d, --parts %d): at most 1 GiB per chunk", cfg.Buffer/int64(cfg.Parts), cfg.Buffer, cfg.Parts)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.CommitWait <= 0 {
		cfg.CommitWait = 2 * cfg.Timeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Run == "" {
		cfg.Run = "ckpt"
	}
	a := &Agent{cfg: cfg, place: p, log: cfg.Log, done: map[int64]map[int]bool{}, inc: newIncarnation(), incs: map[int]uint64{},
		failed: map[int]bool{}, rerep: make(chan struct{}, 1)}
	if cfg.Timeline != nil {
		a.tl = &timeline{w: cfg.Timeline}
	}
	if il := cfg.Interleave; il != nil && len(il.Starts) > 0 && il.Starts[0] > 1e-3 {
		a.tick.lead = 1 // the given iteration starts with a comm op: span k follows op k+1
	}
	a.st = store.New(fmt.Sprintf("ckpt-%s-%d", cfg.Run, cfg.Rank), cfg.Memory)
	chunk := cfg.Buffer / int64(cfg.Parts)
	// Frames on agent links: chunks of at most R/p; a trainer's dense
	// frames up to the memory bound.
	maxPayload := max(chunk, cfg.Memory)
	if maxPayload <= 0 || maxPayload > wire.DefaultLimits.MaxPayload {
		maxPayload = wire.DefaultLimits.MaxPayload
	}
	a.lim = wire.Limits{MaxPayload: maxPayload}
	return a, nil
}

// Chunk is the largest chunk this agent sends: R/p.
func (a *Agent) Chunk() int64 { return a.cfg.Buffer / int64(a.cfg.Parts) }

// Store exposes the replica store (tests, status).
func (a *Agent) Store() *store.Store { return a.st }

// sends returns the ranks (0-based) this rank sends its shard to.
func (a *Agent) sends() []int {
	var out []int
	for _, id := range a.place.Sends(a.cfg.Rank + 1) {
		out = append(out, id-1)
	}
	return out
}

// holders returns the ranks that hold owner's shard, owner first.
func (a *Agent) holders(owner int) []int {
	var out []int
	for _, id := range a.place.Holders(owner + 1) {
		out = append(out, id-1)
	}
	return out
}

// Serve listens on the peer address and the trainer socket and serves
// until ctx is done. It returns the first listen error.
func (a *Agent) Serve(ctx context.Context) error {
	a.ctx, a.cancel = context.WithCancel(ctx)
	defer a.cancel()
	pl, err := a.listenPeers()
	if err != nil {
		return fmt.Errorf("agent: rank %d: listen for peers at %s: %w", a.cfg.Rank, a.cfg.Peers[a.cfg.Rank], err)
	}
	defer pl.Close()
	if a.cfg.Socket != "" {
		_ = os.Remove(a.cfg.Socket)
	}
	var tl net.Listener
	if a.cfg.Socket != "" {
		old := umask(0o077)
		tl, err = net.Listen("unix", a.cfg.Socket)
		umask(old)
		if err != nil {
			return fmt.Errorf("agent: rank %d: listen for the trainer at %s: %w", a.cfg.Rank, a.cfg.Socket, err)
		}
		defer os.Remove(a.cfg.Socket)
		defer tl.Close()
	}
	a.log.Info("agent ready", "rank", a.cfg.Rank, "world", a.cfg.World, "peers", pl.Addr().String(), "socket", a.cfg.Socket,
		"m", a.cfg.M, "strategy", a.place.Strategy, "sends_to", a.sends(), "chunk", a.Chunk(), "memory", a.cfg.Memory)
	go func() {
		<-a.ctx.Done()
		pl.Close()
		if tl != nil {
			tl.Close()
		}
	}()
	if tl != nil {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.acceptLoop(tl, a.serveTrainer)
		}()
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		a.announce()
		a.heal()
		a.rereplicateLoop()
	}()
	a.acceptLoop(pl, a.servePeer)
	a.wg.Wait()
	a.st.Close()
	return nil
}

// listenPeers listens on this rank's peer address. An address still in
// use is retried for up to Timeout: a replacement agent started on the
// same host right after its predecessor was killed finds the port held
// until the kernel has torn the dead process down.
func (a *Agent) listenPeers() (net.Listener, error) {
	deadline := time.Now().Add(a.cfg.Timeout)
	for {
		l, err := net.Listen("tcp", a.cfg.Peers[a.cfg.Rank])
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) || time.Now().After(deadline) {
			return l, err
		}
		select {
		case <-a.ctx.Done():
			return nil, context.Cause(a.ctx)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// acceptLoop serves each connection l accepts on its own goroutine until
// the agent stops; then it closes the connections still open, so that a
// trainer or peer idle on one does not hold the agent's exit up.
func (a *Agent) acceptLoop(l net.Listener, serve func(net.Conn)) {
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	context.AfterFunc(a.ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		for c := range open {
			c.Close()
		}
		open = nil
	})
	for {
		c, err := l.Accept()
		if err != nil {
			if a.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			a.log.Warn("accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		mu.Lock()
		if open == nil { // stopping
			mu.Unlock()
			c.Close()
			return
		}
		open[c] = true
		mu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			defer func() {
				mu.Lock()
				delete(open, c)
				mu.Unlock()
				c.Close()
			}()
			serve(c)
		}()
	}
}

// markDone records that owner's shard of iter, saved in epoch, is
// complete on all its holders, and commits iter once every rank's shard
// of the current epoch is (C-RC-1). A report of another epoch is stale (or
// of an attempt this agent has abandoned) and never counts.
func (a *Agent) markDone(owner int, iter, epoch int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if epoch != a.epoch {
		a.log.Debug("report of an abandoned attempt ignored", "owner", owner, "iter", iter, "attempt_epoch", epoch, "epoch", a.epoch)
		return
	}
	set := a.done[iter]
	if set == nil {
		set = map[int]bool{}
		a.done[iter] = set
	}
	set[owner] = true
	if len(set) < a.cfg.World {
		return
	}
	for it := range a.done {
		if it <= iter {
			delete(a.done, it)
		}
	}
	if a.st.SetCommitted(iter, epoch) {
		a.log.Info("iteration committed: every rank's shard is complete on all its holders", "iter", iter, "epoch", epoch)
		a.dropExtras(iter)
	}
}

// loopback reports whether addr's host is a loopback address.
func loopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		h = addr
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}
