// Package engine runs straggle's synchronisation among real processes on
// a lib/mesh mesh: RNA (a controller probes q random workers, the first
// with a gradient ready triggers one global ring allreduce in which
// workers without a gradient join with a null gradient of weight 0),
// Prague-style random-group partial allreduce from a shared seed, and
// blocking ring allreduce (lib/collective) as the baseline.
package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/tensor"
)

// Modes.
const (
	ModeRNA       = "rna"
	ModeGroups    = "groups"
	ModeAllreduce = "allreduce"
)

// Config configures an Engine.
type Config struct {
	Mode         string        // ModeRNA, ModeGroups or ModeAllreduce
	Probes       int           // q, probes per round (rna)
	ProbeTimeout time.Duration // add a probe when none answered within this (0: never, the thesis's behaviour)
	Eta          int           // staleness bound in rounds; negative: unbounded
	Sum          bool          // accumulate pending gradients by sum instead of the weighted average
	Controller   int           // the rank that runs the controller first
	Workers      []int         // ranks that train, ascending
	Rounds       int           // stop after this many rounds (0: when every worker's input ended)
	TargetLoss   float64       // stop once a round's loss is at most this (0: off)
	Seed         uint64        // probe sampling and groups derive from it
	GroupSize    int           // groups mode: ranks per group
	Dim          int           // gradient elements
	Timeout      time.Duration // longest wait for one ring step
	Log          *slog.Logger

	// rna-h: RNA inside groups from the recursive fast/slow split of the
	// workers' profiled iteration times, and a parameter server (the
	// controller) averaging the groups' models every PSPeriod rounds of
	// a group. Params and SetParams reach the trainer's model.
	Hier      bool
	PSPeriod  int
	Params    func() []float32
	SetParams func([]float32)
}

// ModeRNAH is RNA inside groups joined by a parameter server; it runs
// as ModeRNA with Config.Hier set.
const ModeRNAH = "rna-h"

// Result is one round as a worker applies it.
type Result struct {
	Round        uint64
	Epoch        uint32
	Initiator    int   // -1 when none (groups, allreduce)
	Probes       []int // the controller's probe set
	Members      int   // ranks in the ring
	Weight       int   // Σw: contributors
	Sum          []float32
	Contributed  bool // this rank's gradient is in Sum
	Accumulated  int  // gradients folded into this rank's contribution
	Staleness    int  // largest staleness among them, in rounds
	DroppedStale int  // gradients this rank dropped as staler than η, so far
	Elapsed      time.Duration
}

// Applier receives every round's result, in round order, and returns the
// loss after applying it (NaN if unknown).
type Applier func(*Result) float64

// Engine is one rank's part of a straggle run.
type Engine struct {
	cfg   Config
	m     *mesh.Mesh
	t     *transport
	rank  int
	apply Applier
	log   *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond
	pending []item
	applied atomic.Uint64
	// armed is the probe this rank owes an answer to (round 0: none),
	// acked the last probe it answered. A probe is identified by its
	// round and the controller that sent it: after a takeover the new
	// controller probes again round ids the dead one had already probed,
	// and an ack sent to the dead one must not stop this rank from
	// answering the new one.
	armed    probeID
	acked    probeID
	ended    bool
	endSent  bool
	dropped  int
	maxRound uint64
	maxEpoch uint32

	ctrl        atomic.Int32
	ctrlRunning atomic.Bool
	ctrlWG      sync.WaitGroup
	stopOnce    sync.Once
	stopped     chan struct{}
	failOnce    sync.Once
	failed      chan struct{}
	failErr     error
	start       time.Time
	lastApply   time.Time

	// RoundTimes are the times between consecutive rounds applied here
	// (read them after Run returns).
	RoundTimes []time.Duration
	// Weights are the rounds' Σw, in order.
	Weights []int
	// Contribs counts the rounds this rank's gradient was part of.
	Contribs int
}

// probeID identifies a probe: the round it is for and the controller
// (rank) that sent it; the ack goes back to that rank.
type probeID struct {
	round uint64
	by    int
}

type item struct {
	version uint64
	g       []float32
}

// New prepares an engine on an open mesh. In rna and groups modes the
// mesh should be tolerant (so a dead rank is dropped, not fatal).
func New(m *mesh.Mesh, cfg Config, apply Applier) *Engine {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	e := &Engine{cfg: cfg, m: m, rank: m.Rank(), apply: apply, log: cfg.Log, stopped: make(chan struct{}), failed: make(chan struct{})}
	e.cond = sync.NewCond(&e.mu)
	e.ctrl.Store(int32(cfg.Controller))
	switch cfg.Mode {
	case ModeGroups:
		e.t = newTransport(m, 64+4*(cfg.Dim+2), e.onDead)
	case ModeRNA:
		e.t = newTransport(m, 64+8*m.World()+4*(cfg.Dim+2), e.onDead)
	}
	return e
}

// IsWorker says whether this rank trains.
func (e *Engine) IsWorker() bool { return slices.Contains(e.cfg.Workers, e.rank) }

// Applied returns the last round applied here: the version of the
// parameters a gradient started now is computed on.
func (e *Engine) Applied() uint64 { return e.applied.Load() }

// Profile reports this worker's mean iteration time (rna-h groups are
// formed from every worker's).
func (e *Engine) Profile(ms float64) {
	if e.cfg.Hier {
		e.sendCtrl(Msg{Kind: KindProfile, Weight: ms})
	}
}

// Stopped is closed when the run is over.
func (e *Engine) Stopped() <-chan struct{} { return e.stopped }

// Push hands the engine a gradient computed on the parameters of round
// version (Applied when its computation started). It never blocks.
func (e *Engine) Push(version uint64, g []float32) {
	e.mu.Lock()
	e.pending = append(e.pending, item{version, g})
	p := e.armed
	ack := p.round != 0 && e.acked != p
	if ack {
		e.acked = p
	}
	e.cond.Broadcast()
	e.mu.Unlock()
	if ack {
		e.sendAck(p)
	}
}

// EndInput says this rank's input ended: no more gradients will come.
func (e *Engine) EndInput() {
	e.mu.Lock()
	e.ended = true
	send := len(e.pending) == 0 && !e.endSent && e.cfg.Mode == ModeRNA
	if send {
		e.endSent = true
	}
	e.cond.Broadcast()
	e.mu.Unlock()
	if send {
		e.sendCtrl(Msg{Kind: KindEnd})
	}
}

// sendAck answers probe p, to the controller that sent it.
func (e *Engine) sendAck(p probeID) {
	if err := e.t.send(p.by, Msg{Kind: KindAck, Round: p.round}); err != nil {
		e.log.Debug("straggle: ack lost", "round", p.round, "controller", p.by, "err", err)
	}
}

func (e *Engine) sendCtrl(msg Msg) {
	if err := e.t.send(int(e.ctrl.Load()), msg); err != nil {
		e.log.Debug("straggle: message to the controller lost", "kind", msg.Kind, "err", err)
	}
}

func (e *Engine) stop() { e.stopOnce.Do(func() { close(e.stopped) }) }

// fail ends this rank's run with err: the mesh was aborted, or this rank
// was dropped by the others (it was hung, and is no longer in the run).
func (e *Engine) fail(err error) {
	e.failOnce.Do(func() {
		e.failErr = err
		close(e.failed)
		e.t.close()
	})
}

// Run runs this rank's roles until the run ends.
func (e *Engine) Run(ctx context.Context) error {
	e.start = time.Now()
	e.lastApply = e.start
	stopCtx := context.AfterFunc(ctx, func() {
		e.mu.Lock()
		e.cond.Broadcast()
		e.mu.Unlock()
	})
	defer stopCtx()
	// A job that dropped this rank (the mesh's verdict, read after the
	// peers' connections closed) ends every role, whatever it waits on.
	go func() {
		select {
		case <-e.m.Aborted():
			e.fail(e.m.Err())
			e.mu.Lock()
			e.cond.Broadcast()
			e.mu.Unlock()
		case <-e.stopped:
		}
	}()
	switch e.cfg.Mode {
	case ModeAllreduce:
		return e.runAllreduce(ctx)
	case ModeGroups:
		defer e.t.close()
		return e.runGroups(ctx)
	case ModeRNA:
		defer e.t.close()
		if e.rank == e.cfg.Controller {
			e.startController(false)
		}
		var err error
		if e.IsWorker() {
			err = e.runWorker(ctx)
		} else {
			select {
			case <-e.stopped:
			case <-e.failed:
				err = e.failErr
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
		e.stop()
		e.t.close()
		e.ctrlWG.Wait()
		return err
	}
	return fmt.Errorf("straggle: unknown mode %q", e.cfg.Mode)
}

// onDead is the transport's (and through it the mesh's) news of a dead
// rank: the controller role drops it, and if it was the controller the
// lowest live worker takes over.
func (e *Engine) onDead(r int, err error) {
	select {
	case <-e.stopped:
		return
	default:
	}
	if merr := e.m.Err(); merr != nil {
		e.fail(merr)
		return
	}
	e.log.Warn("straggle: rank gone, going on without it", "dead_rank", r, "err", err)
	if e.ctrlRunning.Load() {
		select {
		case e.t.ctrlIn <- Msg{Kind: kindDeadEv, Rank: int32(r)}:
		case <-e.t.stop:
		}
	}
	// The controller is gone (now, or earlier with the successor then
	// chosen gone since): the lowest live worker takes over.
	if c := int(e.ctrl.Load()); e.cfg.Mode == ModeRNA && c != e.rank && e.t.isDead(c) {
		next := -1
		for _, w := range e.cfg.Workers {
			if !e.t.isDead(w) {
				next = w
				break
			}
		}
		if next == e.rank {
			e.log.Warn("straggle: controller gone; this rank takes over", "old_controller", c)
			e.ctrl.Store(int32(e.rank))
			e.startController(true)
		}
	}
	if e.cfg.Mode == ModeGroups {
		e.mu.Lock()
		e.cond.Broadcast()
		e.mu.Unlock()
	}
}

// kindDeadEv is a local event (never on the wire): Rank died.
const kindDeadEv Kind = 200

// ---------------------------------------------------------------- worker

type activation struct {
	msg     Msg
	cancel  chan struct{}
	contrib []float32 // nil: null gradient
	nacc    int
	stale   int
	discard bool // a retry of a round already applied here
}

// runWorker is the worker's communication side (rna).
func (e *Engine) runWorker(ctx context.Context) error {
	exec := make(chan *activation, 64)
	execDone := make(chan error, 1)
	go func() { execDone <- e.executor(exec) }()
	var running *activation
	saved := map[uint64]*activation{}
	epochs := map[uint64]uint32{} // newest epoch activated, by round
	var newest uint64
	defer func() {
		if exec != nil {
			close(exec)
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-execDone:
			return err
		case <-e.failed:
			return e.failErr
		case msg := <-e.t.workerIn:
			if (msg.Kind == KindProbe || msg.Kind == KindActivate) && msg.From != int(e.ctrl.Load()) {
				// From a controller that has been replaced (its last
				// messages can be read after the new one's SYNC, since
				// each peer has its own reader): acting on it would run
				// or arm a round the new controller does not know of.
				e.log.Debug("straggle: message from a former controller ignored", "kind", msg.Kind, "from", msg.From, "round", msg.Round)
				continue
			}
			switch msg.Kind {
			case KindProbe:
				p := probeID{msg.Round, msg.From}
				e.mu.Lock()
				var ack bool
				if msg.Round > e.maxRound {
					e.armed = p
					ack = len(e.pending) > 0 && e.acked != p
					if ack {
						e.acked = p
					}
				}
				e.mu.Unlock()
				if ack {
					e.sendAck(p)
				}
			case KindActivate:
				r := msg.Round
				if last, ok := epochs[r]; r < newest || ok && msg.Epoch <= last {
					// An older attempt, overtaken (it can arrive late
					// from a controller that died): never run it.
					continue
				}
				epochs[r], newest = msg.Epoch, r
				for k := range epochs {
					if k+2 < r {
						delete(epochs, k)
					}
				}
				a := &activation{msg: msg, cancel: make(chan struct{})}
				if prev := saved[r]; prev != nil {
					a.contrib, a.nacc, a.stale = prev.contrib, prev.nacc, prev.stale
				} else if r <= e.applied.Load() {
					a.discard = true
				} else {
					a.contrib, a.nacc, a.stale = e.take(r)
					saved[r] = a
				}
				if r <= e.applied.Load() {
					a.discard, a.contrib = true, nil
				}
				for k := range saved {
					if k+2 < r {
						delete(saved, k)
					}
				}
				e.mu.Lock()
				e.maxRound = max(e.maxRound, r)
				e.maxEpoch = max(e.maxEpoch, msg.Epoch)
				e.mu.Unlock()
				if running != nil && (running.msg.Round < r || running.msg.Epoch < msg.Epoch) {
					close(running.cancel)
				}
				running = a
				exec <- a
			case KindSync:
				e.ctrl.Store(int32(msg.From))
				e.mu.Lock()
				if e.armed.by != msg.From {
					// The dead controller's probe: nobody waits for it.
					e.armed = probeID{}
				}
				st := Msg{Kind: KindState, Round: e.maxRound, Epoch: e.maxEpoch}
				if e.ended && len(e.pending) == 0 {
					st.Weight = 1
					e.endSent = true
				}
				e.mu.Unlock()
				e.sendCtrl(st)
			case KindStop:
				e.stop()
				close(exec)
				exec = nil
				err := <-execDone
				e.t.close()
				return err
			}
		}
	}
}

// take removes the pending gradients for round r: those staler than η are
// dropped, the rest accumulated (weighted average or sum).
func (e *Engine) take(r uint64) ([]float32, int, int) {
	e.mu.Lock()
	items := e.pending
	e.pending = nil
	if e.armed.round <= r {
		e.armed = probeID{}
	}
	sendEnd := e.ended && !e.endSent && e.cfg.Mode == ModeRNA
	if sendEnd {
		e.endSent = true
	}
	kept := items[:0]
	for _, it := range items {
		if e.cfg.Eta >= 0 && staleness(r, it.version) > e.cfg.Eta {
			e.dropped++
			continue
		}
		kept = append(kept, it)
	}
	e.mu.Unlock()
	if sendEnd {
		defer e.sendCtrl(Msg{Kind: KindEnd})
	}
	if len(kept) == 0 {
		return nil, 0, 0
	}
	g, st := accumulate(kept, r, e.cfg.Sum)
	return g, len(kept), st
}

// staleness of a gradient computed on version v, contributed to round r:
// 0 for one computed on the parameters of round r−1.
func staleness(r, v uint64) int {
	if v+1 >= r {
		return 0
	}
	return int(r - 1 - v)
}

// accumulate folds several pending gradients into one contribution: the
// thesis's linearly weighted average Σ(v−(k−τ)+1)·g / Σ(v−(k−τ)+1), with
// k the newest version and τ the gap to the oldest, or their sum. It
// returns the contribution and the largest staleness for round r.
func accumulate(items []item, r uint64, sum bool) ([]float32, int) {
	if len(items) == 1 {
		return items[0].g, staleness(r, items[0].version)
	}
	k, lo := items[0].version, items[0].version
	for _, it := range items {
		k, lo = max(k, it.version), min(lo, it.version)
	}
	out := make([]float32, len(items[0].g))
	wsum := 0.0
	for _, it := range items {
		w := 1.0
		if !sum {
			w = float64(it.version-lo) + 1
		}
		wsum += w
		for i, v := range it.g {
			out[i] += float32(w) * v
		}
	}
	if !sum {
		inv := float32(1 / wsum)
		for i := range out {
			out[i] *= inv
		}
	}
	return out, staleness(r, lo)
}

// executor runs the activations one at a time: at most one collective is
// active on a worker.
func (e *Engine) executor(exec <-chan *activation) error {
	for a := range exec {
		select {
		case <-a.cancel:
			continue
		default:
		}
		msg := a.msg
		members := make([]int, len(msg.Members))
		for i, r := range msg.Members {
			members[i] = int(r)
		}
		v := make([]float32, e.cfg.Dim+1)
		if a.contrib != nil {
			copy(v, a.contrib)
			v[e.cfg.Dim] = 1
		}
		err := e.t.ringAllReduce(v, members, msg.Round, msg.Epoch, a.cancel, e.cfg.Timeout)
		if errors.Is(err, errCancelled) {
			continue
		}
		if err != nil {
			e.log.Info("straggle: round failed here; the controller retries it", "round", msg.Round, "epoch", msg.Epoch, "err", err)
			e.sendCtrl(Msg{Kind: KindFail, Round: msg.Round, Epoch: msg.Epoch})
			continue
		}
		w := int(math.Round(float64(v[e.cfg.Dim])))
		loss := math.NaN()
		if !a.discard && msg.Round > e.applied.Load() {
			now := time.Now()
			res := &Result{Round: msg.Round, Epoch: msg.Epoch, Initiator: int(msg.Rank), Members: len(members), Weight: w,
				Sum: v[:e.cfg.Dim], Contributed: a.contrib != nil, Accumulated: a.nacc, Staleness: a.stale, Elapsed: now.Sub(e.start)}
			for _, p := range msg.Probes {
				res.Probes = append(res.Probes, int(p))
			}
			e.mu.Lock()
			res.DroppedStale = e.dropped
			e.mu.Unlock()
			e.RoundTimes = append(e.RoundTimes, now.Sub(e.lastApply))
			e.lastApply = now
			e.Weights = append(e.Weights, w)
			if res.Contributed {
				e.Contribs++
			}
			pushing := int(msg.Rank) == e.rank && e.cfg.Params != nil
			if msg.Step&StepPushBase != 0 && pushing {
				e.sendCtrl(Msg{Kind: KindPush, Round: msg.Round, Step: StepPushBase, Data: tensor.Bytes(e.cfg.Params())})
			}
			if len(msg.Data) > 0 && e.cfg.SetParams != nil {
				// The averaged model from the parameter server, loaded
				// by every member at the same round.
				p := make([]float32, len(msg.Data)/4)
				for i := range p {
					p[i] = math.Float32frombits(binary.LittleEndian.Uint32(msg.Data[4*i:]))
				}
				e.cfg.SetParams(p)
			}
			if e.apply != nil {
				loss = e.apply(res)
			}
			e.applied.Store(msg.Round)
			e.t.gc(msg.Round)
			if msg.Step&StepPush != 0 && pushing {
				e.sendCtrl(Msg{Kind: KindPush, Round: msg.Round, Step: StepPush, Data: tensor.Bytes(e.cfg.Params())})
			}
		}
		e.sendCtrl(Msg{Kind: KindDone, Round: msg.Round, Epoch: msg.Epoch, Weight: float64(w), Loss: loss})
	}
	return nil
}

// ---------------------------------------------------------------- groups

// Groups returns the partition of live (in order) into groups of about
// size g that every rank derives alike for round r from seed.
func Groups(seed, r uint64, live []int, g int) [][]int {
	p := slices.Clone(live)
	rng := rand.New(rand.NewPCG(seed, r))
	rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
	g = max(g, 1)
	ng := max(1, len(p)/g)
	out := make([][]int, ng)
	for i, r := range p {
		out[i%ng] = append(out[i%ng], r)
	}
	return out
}

// runGroups is Prague-style partial allreduce with no coordinator: in
// round k every rank waits for its own gradient, then allreduces with the
// group the shared seed gives it for k; replicas of different groups
// differ until they meet again.
func (e *Engine) runGroups(ctx context.Context) error {
	defer e.stop()
	if err := e.groupRounds(ctx); err != nil {
		return err
	}
	return e.finish(ctx)
}

// finish tells every other rank this one is done and waits until every
// live rank is, so that no rank leaves while others may still need it
// (a clean exit would look like a death and change the groups).
func (e *Engine) finish(ctx context.Context) error {
	for r := range e.t.world {
		if r != e.rank {
			_ = e.t.send(r, Msg{Kind: KindStop})
		}
	}
	done := map[int]bool{e.rank: true}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		all := true
		for r := range e.t.world {
			if !done[r] && !e.t.isDead(r) {
				all = false
			}
		}
		if all {
			return nil
		}
		select {
		case msg := <-e.t.workerIn:
			if msg.Kind == KindStop {
				done[msg.From] = true
			}
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitInput blocks until a gradient is pending, the input has ended or
// ctx is done (its error).
func (e *Engine) waitInput(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.pending) == 0 && !e.ended && ctx.Err() == nil {
		e.cond.Wait()
	}
	return ctx.Err()
}

func (e *Engine) groupRounds(ctx context.Context) error {
	for k := uint64(1); e.cfg.Rounds == 0 || k <= uint64(e.cfg.Rounds); k++ {
		if err := e.waitInput(ctx); err != nil {
			return err
		}
		// Input ended: join the remaining rounds with null gradients.
		g, nacc, st := e.take(k)
		for attempt := 0; ; attempt++ {
			var live []int
			for _, w := range e.cfg.Workers {
				if !e.t.isDead(w) {
					live = append(live, w)
				}
			}
			var mine []int
			for _, grp := range Groups(e.cfg.Seed, k, live, e.cfg.GroupSize) {
				if slices.Contains(grp, e.rank) {
					mine = grp
				}
			}
			v := make([]float32, e.cfg.Dim+1)
			if g != nil {
				copy(v, g)
				v[e.cfg.Dim] = 1
			}
			epoch := uint32(len(e.cfg.Workers) - len(live))
			err := e.t.ringAllReduce(v, mine, k, epoch, ctx.Done(), e.cfg.Timeout)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				select {
				case <-e.failed:
					return e.failErr
				default:
				}
				if attempt > 3*len(e.cfg.Workers) {
					return err
				}
				e.log.Info("straggle: group allreduce failed; retrying without the dead", "round", k, "group", mine, "err", err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			now := time.Now()
			res := &Result{Round: k, Epoch: epoch, Initiator: -1, Members: len(mine), Weight: int(math.Round(float64(v[e.cfg.Dim]))),
				Sum: v[:e.cfg.Dim], Contributed: g != nil, Accumulated: nacc, Staleness: st, Elapsed: now.Sub(e.start)}
			for _, p := range mine {
				res.Probes = append(res.Probes, p)
			}
			e.RoundTimes = append(e.RoundTimes, now.Sub(e.lastApply))
			e.lastApply = now
			e.Weights = append(e.Weights, res.Weight)
			e.Contribs++
			if e.apply != nil {
				e.apply(res)
			}
			e.applied.Store(k)
			break
		}
	}
	return nil
}

// ------------------------------------------------------------- allreduce

// runAllreduce is the blocking baseline: every round every rank waits for
// its own gradient and all ranks run lib/collective's ring allreduce. An
// extra element counts ranks whose input ended; the run stops when all
// have.
func (e *Engine) runAllreduce(ctx context.Context) error {
	defer e.stop()
	comm := collective.New(e.m, collective.Options{})
	world := e.m.World()
	for k := uint64(1); e.cfg.Rounds == 0 || k <= uint64(e.cfg.Rounds); k++ {
		if err := e.waitInput(ctx); err != nil {
			return err
		}
		g, nacc, st := e.take(k)
		v := make([]float32, e.cfg.Dim+2)
		if g != nil {
			copy(v, g)
			v[e.cfg.Dim] = 1
		} else {
			v[e.cfg.Dim+1] = 1
		}
		if err := comm.AllReduce(ctx, v); err != nil {
			return err
		}
		if int(math.Round(float64(v[e.cfg.Dim+1]))) == world {
			return nil
		}
		now := time.Now()
		res := &Result{Round: k, Initiator: -1, Members: world, Weight: int(math.Round(float64(v[e.cfg.Dim]))),
			Sum: v[:e.cfg.Dim], Contributed: g != nil, Accumulated: nacc, Staleness: st, Elapsed: now.Sub(e.start)}
		e.RoundTimes = append(e.RoundTimes, now.Sub(e.lastApply))
		e.lastApply = now
		e.Weights = append(e.Weights, res.Weight)
		if g != nil {
			e.Contribs++
		}
		loss := math.NaN()
		if e.apply != nil {
			loss = e.apply(res)
		}
		e.applied.Store(k)
		if e.cfg.TargetLoss > 0 && loss <= e.cfg.TargetLoss {
			return nil
		}
	}
	return nil
}
