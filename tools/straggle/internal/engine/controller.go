package engine

import (
	"log/slog"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"trainwire.dev/tools/straggle/internal/sim"
)

func (e *Engine) startController(takeover bool) {
	if !e.ctrlRunning.CompareAndSwap(false, true) {
		return
	}
	e.ctrlWG.Go(func() { e.controller(takeover) })
}

// round is an activated round of one group, until every member is done.
type round struct {
	r           uint64
	epoch       uint32
	outstanding map[int]bool
	failed      bool
	initiator   int
	probes      []int
	push        bool // rna-h: the initiator pushes the group's model after the round
	base        bool // rna-h: the group's first round: the initiator pushes the model it starts from
	started     time.Time
}

// group is one ring the controller sequences: every worker in rna mode,
// one of the fast/slow groups in rna-h.
type group struct {
	members   []int
	cur       *round
	next      uint64 // round being probed; 0 when none
	probed    []int
	initiator int
	lastProbe time.Time
	completed int
	setParams []byte // rna-h: the averaged model, loaded by the next round
	lastLoss  float64
}

// Partition is the thesis's recursive grouping (§5.2): with ζ the spread
// of the mean iteration times t of a set and v their mean, a set with
// ζ > v splits into the workers slower than v and the rest, recursively,
// until ζ ≤ v inside every group. Groups come out fast first; each is in
// ascending rank order.
func Partition(ranks []int, t map[int]float64) [][]int {
	if len(ranks) <= 1 {
		return [][]int{slices.Clone(ranks)}
	}
	v, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	for _, r := range ranks {
		v += t[r]
		lo, hi = min(lo, t[r]), max(hi, t[r])
	}
	v /= float64(len(ranks))
	if hi-lo <= v {
		return [][]int{slices.Clone(ranks)}
	}
	var fast, slow []int
	for _, r := range ranks {
		if t[r] > v {
			slow = append(slow, r)
		} else {
			fast = append(fast, r)
		}
	}
	return append(Partition(fast, t), Partition(slow, t)...)
}

// controller sequences the rounds of every group: one activation at a
// time per group (ACTIVATE r' only after every DONE of the group's
// previous round), probes for the next round while one runs, the first
// ACK per round wins and later ones are expired, dead workers leave the
// ring and a failed round is retried under a new epoch. In rna-h it first
// gathers every worker's profiled iteration time, splits the workers into
// groups, and then acts as the parameter server (ps.go) the groups push their
// models to every PSPeriod rounds of a group.
func (e *Engine) controller(takeover bool) {
	c := e.newCtrl()
	if takeover && !c.takeover() {
		return
	}
	c.run()
}

// ctrl is the controller's state: the groups it sequences, what it knows
// of the workers, and the round and epoch counters.
type ctrl struct {
	e         *Engine
	log       *slog.Logger
	rng       *rand.Rand
	dead      map[int]bool
	ended     map[int]bool
	groups    []*group
	hier      bool            // rna-h
	regrouped bool            // rna-h: groups formed (always true in rna)
	profile   map[int]float64 // rna-h: each worker's profiled iteration time
	ps        *paramServer    // rna-h
	counter   uint64          // the last round id handed out
	epoch     uint32
	total     int // rounds completed, every group together
	// later holds messages other than State that came in during a
	// takeover (an End, say): handled once it is done, never dropped.
	later []Msg
	// probeExpiry is how long a probe may go unanswered before one more
	// worker is probed.
	probeExpiry time.Duration
}

func (e *Engine) newCtrl() *ctrl {
	c := &ctrl{e: e, log: e.log.With("role", "controller"), rng: rand.New(rand.NewPCG(e.cfg.Seed, 0x5eed)),
		dead: map[int]bool{}, ended: map[int]bool{}, hier: e.cfg.Hier, regrouped: !e.cfg.Hier,
		profile: map[int]float64{}, ps: newParamServer()}
	c.groups = []*group{{members: slices.Clone(e.cfg.Workers), initiator: -1, lastLoss: math.NaN()}}
	// No wait of the controller is unbounded. A probe nobody answers
	// expires after --probe-timeout, or after the mesh timeout when that
	// is 0 (the thesis never expires probes; a worker with a gradient
	// answers at once, so this only acts when probed workers are hung or
	// far slower than the timeout), and one more worker is probed.
	c.probeExpiry = e.cfg.ProbeTimeout
	if c.probeExpiry <= 0 {
		c.probeExpiry = e.cfg.Timeout
	}
	return c
}

func (c *ctrl) isLive(w int) bool { return !c.dead[w] && !c.e.t.isDead(w) }

func (c *ctrl) liveOf(ms []int) []int {
	var out []int
	for _, w := range ms {
		if c.isLive(w) {
			out = append(out, w)
		}
	}
	return out
}

func (c *ctrl) groupOf(w int) *group {
	for _, g := range c.groups {
		if slices.Contains(g.members, w) {
			return g
		}
	}
	return nil
}

// candidates are g's live members that may still be probed for its next
// round.
func (c *ctrl) candidates(g *group) []int {
	var out []int
	for _, w := range c.liveOf(g.members) {
		if !c.ended[w] && !slices.Contains(g.probed, w) {
			out = append(out, w)
		}
	}
	return out
}

func (c *ctrl) probe(g *group, p int) {
	g.probed = append(g.probed, p)
	g.lastProbe = time.Now()
	_ = c.e.t.send(p, Msg{Kind: KindProbe, Round: g.next})
}

// probeSome probes a sample of --probes of g's candidates.
func (c *ctrl) probeSome(g *group) {
	cs := c.candidates(g)
	for _, i := range sim.Sample(c.rng, len(cs), c.e.cfg.Probes) {
		c.probe(g, cs[i])
	}
}

// startProbing hands g the next round id and probes for its initiator.
func (c *ctrl) startProbing(g *group) {
	c.counter++
	g.next, g.probed, g.initiator = c.counter, nil, -1
	c.probeSome(g)
}

// activate starts round r of g under the current epoch on its live
// members.
func (c *ctrl) activate(g *group, r uint64, init int, probes []int, push, base bool) {
	members := c.liveOf(g.members)
	g.cur = &round{r: r, epoch: c.epoch, outstanding: map[int]bool{}, initiator: init, probes: probes, push: push, base: base, started: time.Now()}
	msg := Msg{Kind: KindActivate, Round: r, Epoch: c.epoch, Rank: int32(init), Data: g.setParams}
	if push {
		msg.Step |= StepPush
	}
	if base {
		msg.Step |= StepPushBase
	}
	for _, m := range members {
		g.cur.outstanding[m] = true
		msg.Members = append(msg.Members, int32(m))
	}
	for _, p := range probes {
		msg.Probes = append(msg.Probes, int32(p))
	}
	for _, m := range members {
		_ = c.e.t.send(m, msg)
	}
}

// handle is the controller's reaction to one message.
func (c *ctrl) handle(msg Msg) {
	g := c.groupOf(msg.From)
	switch msg.Kind {
	case KindAck:
		// First reply wins; the others are expired (their probe id is
		// already the next round's).
		if g != nil && msg.Round == g.next && g.initiator < 0 && slices.Contains(g.probed, msg.From) {
			g.initiator = msg.From
		}
	case KindDone:
		if g != nil && g.cur != nil && msg.Round == g.cur.r && msg.Epoch == g.cur.epoch {
			delete(g.cur.outstanding, msg.From)
			if !math.IsNaN(msg.Loss) {
				g.lastLoss = msg.Loss
			}
		}
	case KindFail:
		if g != nil && g.cur != nil && msg.Round == g.cur.r && msg.Epoch == g.cur.epoch {
			g.cur.failed = true
		}
	case KindEnd:
		c.ended[msg.From] = true
		if g != nil && g.initiator < 0 {
			if i := slices.Index(g.probed, msg.From); i >= 0 {
				g.probed = slices.Delete(g.probed, i, i+1)
			}
		}
	case KindProfile:
		if !c.regrouped {
			c.profile[msg.From] = msg.Weight
		}
	case KindPush:
		c.onPush(g, msg)
	case kindDeadEv:
		c.onDead(g, int(msg.Rank))
	}
}

// onPush hands a group's push to the parameter server: a base push
// records the model the group starts from; a regular one adds the group's
// progress and gives the group the global model to load next round.
func (c *ctrl) onPush(g *group, msg Msg) {
	gi := slices.Index(c.groups, g)
	if gi < 0 || len(msg.Data) == 0 {
		return
	}
	if msg.Step&StepPushBase != 0 {
		if err := c.ps.start(gi, msg.Data); err != nil {
			c.log.Warn("straggle: base push ignored", "group", gi, "from", msg.From, "err", err)
		}
		return
	}
	p, err := c.ps.push(gi, msg.Data)
	if err != nil {
		c.log.Warn("straggle: push ignored", "group", gi, "from", msg.From, "err", err)
		return
	}
	g.setParams = p
	c.log.Debug("straggle: group's progress added to the global model", "group", gi)
}

// onDead takes dead worker r out of its group's round and probes.
func (c *ctrl) onDead(g *group, r int) {
	c.dead[r] = true
	if g == nil {
		return
	}
	if g.cur != nil && g.cur.outstanding[r] {
		g.cur.failed = true
	}
	if g.cur != nil {
		delete(g.cur.outstanding, r)
	}
	if g.initiator == r {
		g.initiator = -1
	}
	if i := slices.Index(g.probed, r); i >= 0 && g.initiator < 0 {
		g.probed = slices.Delete(g.probed, i, i+1)
		if cs := c.candidates(g); len(cs) > 0 {
			c.probe(g, cs[c.rng.IntN(len(cs))])
		}
	}
}

func (c *ctrl) stopAll(why string) {
	c.log.Info("straggle: run over", "why", why, "rounds", c.total, "groups", len(c.groups))
	for w := range c.e.t.world {
		if w == c.e.rank || c.isLive(w) {
			_ = c.e.t.send(w, Msg{Kind: KindStop})
		}
	}
	c.e.stop()
}

// takeover asks every live worker where it is and re-runs the newest round
// any of them saw (the old controller may have died in it). Groups are not
// rebuilt: the new controller runs one global ring. It reports false when
// the engine stopped meanwhile.
func (c *ctrl) takeover() bool {
	c.regrouped = true
	want := map[int]bool{}
	for _, w := range c.liveOf(c.e.cfg.Workers) {
		want[w] = true
		_ = c.e.t.send(w, Msg{Kind: KindSync})
	}
	var maxR uint64
	var maxE uint32
	deadline := time.After(c.e.cfg.Timeout)
	for len(want) > 0 {
		select {
		case msg := <-c.e.t.ctrlIn:
			switch msg.Kind {
			case KindState:
				delete(want, msg.From)
				maxR, maxE = max(maxR, msg.Round), max(maxE, msg.Epoch)
				if msg.Weight == 1 {
					c.ended[msg.From] = true
				}
			case kindDeadEv:
				c.dead[int(msg.Rank)] = true
				delete(want, int(msg.Rank))
			default:
				c.later = append(c.later, msg)
			}
		case <-deadline:
			c.log.Warn("straggle: workers did not answer the takeover", "missing", keys(want))
			want = nil
		case <-c.e.t.stop:
			return false
		}
	}
	c.epoch = maxE + 1
	c.counter = maxR
	if maxR > 0 {
		// Round ids count every round activated so far: the rounds
		// before maxR are done, and --rounds still ends the run at the
		// same round id.
		c.total = int(maxR) - 1
		c.activate(c.groups[0], maxR, c.e.rank, nil, false, false)
	}
	c.log.Warn("straggle: controller took over", "round", maxR, "epoch", c.epoch)
	return true
}

// run is the controller's loop: progress every group as far as its state
// allows, then wait for a message or a tick (probe expiry, round limits).
func (c *ctrl) run() {
	for _, g := range c.groups {
		c.startProbing(g)
	}
	for _, msg := range c.later {
		c.handle(msg)
	}
	c.later = nil
	tk := time.NewTicker(max(c.probeExpiry/4, 5*time.Millisecond))
	defer tk.Stop()
	for {
		c.maybeRegroup()
		anyLive, anyWork := false, false
		for _, g := range c.groups {
			if c.progress(g) {
				return
			}
			if len(c.liveOf(g.members)) > 0 {
				anyLive = true
			}
			if g.cur != nil || g.initiator >= 0 || len(g.probed) > 0 || len(c.candidates(g)) > 0 {
				anyWork = true
			}
		}
		if !anyLive {
			c.stopAll("no workers left")
			return
		}
		if !c.regrouped && len(c.profile) >= len(c.liveOf(c.e.cfg.Workers)) && c.idle() {
			continue // regroup now
		}
		if !anyWork {
			c.stopAll("every input ended")
			return
		}
		select {
		case <-c.e.t.stop:
			return
		case <-tk.C:
			for _, g := range c.groups {
				c.onTick(g)
			}
		case msg := <-c.e.t.ctrlIn:
			c.handle(msg)
		}
	}
}

// idle reports whether no group has a round in flight.
func (c *ctrl) idle() bool {
	for _, g := range c.groups {
		if g.cur != nil {
			return false
		}
	}
	return true
}

// maybeRegroup (rna-h): once every live worker has reported its iteration
// time and no round is in flight, split into groups.
func (c *ctrl) maybeRegroup() {
	if c.regrouped {
		return
	}
	live := c.liveOf(c.e.cfg.Workers)
	for _, w := range live {
		if _, ok := c.profile[w]; !ok {
			return
		}
	}
	if !c.idle() {
		return
	}
	c.regrouped = true
	parts := Partition(live, c.profile)
	c.groups = nil
	for _, p := range parts {
		c.groups = append(c.groups, &group{members: p, initiator: -1, lastLoss: math.NaN()})
	}
	c.log.Info("straggle: rna-h groups from the profiled iteration times", "groups", parts, "iter_ms", c.profile)
	for _, g := range c.groups {
		c.startProbing(g)
	}
}

// progress moves g on as far as its state allows: retry a failed round,
// complete a finished one, activate the next once its initiator is known,
// probe when nobody is probed. It reports true when the run is over (and
// every worker told).
func (c *ctrl) progress(g *group) bool {
	for {
		if g.cur != nil && g.cur.failed {
			c.epoch++
			c.log.Info("straggle: retrying round", "round", g.cur.r, "epoch", c.epoch, "live", c.liveOf(g.members))
			c.activate(g, g.cur.r, g.cur.initiator, g.cur.probes, g.cur.push, g.cur.base)
			continue
		}
		if g.cur != nil && len(g.cur.outstanding) == 0 {
			g.completed++
			c.total++
			g.cur = nil
			if c.e.cfg.Rounds > 0 && c.total >= c.e.cfg.Rounds {
				c.stopAll("rounds")
				return true
			}
			if c.e.cfg.TargetLoss > 0 && g.lastLoss <= c.e.cfg.TargetLoss {
				c.stopAll("target loss")
				return true
			}
		}
		// Before the regroup (rna-h) no new round starts once everyone
		// has been profiled.
		holding := !c.regrouped && len(c.profile) >= len(c.liveOf(c.e.cfg.Workers))
		if g.cur == nil && g.initiator >= 0 && !holding {
			ps := c.hier && c.regrouped && c.e.cfg.PSPeriod > 0 && len(c.groups) > 1
			c.activate(g, g.next, g.initiator, g.probed, ps && (g.completed+1)%c.e.cfg.PSPeriod == 0, ps && g.completed == 0)
			g.setParams = nil
			c.startProbing(g)
			continue
		}
		if g.initiator < 0 && len(g.probed) == 0 {
			c.probeSome(g)
		}
		return false
	}
}

// roundLimit is the time g's round may take (each of its ring's 2(n−1)
// steps within the timeout) before it is retried under a new epoch,
// naming the ranks that did not answer.
func (c *ctrl) roundLimit(g *group) time.Duration {
	return time.Duration(2*len(g.members)+1) * c.e.cfg.Timeout
}

// onTick expires g's unanswered probes (probing one more worker) and fails
// a round past its limit.
func (c *ctrl) onTick(g *group) {
	e := c.e
	if g.initiator < 0 && len(g.probed) > 0 && time.Since(g.lastProbe) >= c.probeExpiry {
		if cs := c.candidates(g); len(cs) > 0 {
			p := cs[c.rng.IntN(len(cs))]
			if e.cfg.ProbeTimeout > 0 {
				c.log.Info("straggle: probe expired; probing one more worker", "round", g.next, "probed", g.probed, "added", p)
			} else {
				c.log.Warn("straggle: no probed worker answered within the timeout; probing one more worker", "round", g.next, "probed", g.probed, "added", p, "timeout", c.probeExpiry)
			}
			c.probe(g, p)
		} else {
			if e.cfg.ProbeTimeout == 0 {
				c.log.Warn("straggle: still waiting for a gradient from any probed worker", "round", g.next, "probed", g.probed, "waited", time.Since(g.lastProbe).Round(time.Millisecond))
			}
			g.lastProbe = time.Now()
		}
	}
	if g.cur != nil && !g.cur.failed && len(g.cur.outstanding) > 0 && time.Since(g.cur.started) > c.roundLimit(g) {
		c.log.Warn("straggle: round not done in time; retrying it without waiting for these ranks", "round", g.cur.r, "epoch", g.cur.epoch,
			"not_done", keys(g.cur.outstanding), "limit", c.roundLimit(g))
		g.cur.failed = true
	}
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
