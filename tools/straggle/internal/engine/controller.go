package engine

import (
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
	push        bool
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
// groups, and then acts as the parameter server that averages the groups'
// models every PSPeriod rounds of a group.
func (e *Engine) controller(takeover bool) {
	log := e.log.With("role", "controller")
	rng := rand.New(rand.NewPCG(e.cfg.Seed, 0x5eed))
	dead := map[int]bool{}
	ended := map[int]bool{}
	isLive := func(w int) bool { return !dead[w] && !e.t.isDead(w) }
	liveOf := func(ms []int) []int {
		var out []int
		for _, w := range ms {
			if isLive(w) {
				out = append(out, w)
			}
		}
		return out
	}
	groups := []*group{{members: slices.Clone(e.cfg.Workers), initiator: -1, lastLoss: math.NaN()}}
	groupOf := func(w int) *group {
		for _, g := range groups {
			if slices.Contains(g.members, w) {
				return g
			}
		}
		return nil
	}
	hier := e.cfg.Hier
	regrouped := !hier
	profile := map[int]float64{}
	latest := map[int][]byte{} // rna-h: each group's last pushed model, by group index
	var counter uint64
	var epoch uint32
	total := 0

	candidates := func(g *group) []int {
		var out []int
		for _, w := range liveOf(g.members) {
			if !ended[w] && !slices.Contains(g.probed, w) {
				out = append(out, w)
			}
		}
		return out
	}
	probe := func(g *group, p int) {
		g.probed = append(g.probed, p)
		g.lastProbe = time.Now()
		_ = e.t.send(p, Msg{Kind: KindProbe, Round: g.next})
	}
	startProbing := func(g *group) {
		counter++
		g.next, g.probed, g.initiator = counter, nil, -1
		c := candidates(g)
		for _, i := range sim.Sample(rng, len(c), e.cfg.Probes) {
			probe(g, c[i])
		}
	}
	activate := func(g *group, r uint64, init int, probes []int, push bool) {
		members := liveOf(g.members)
		g.cur = &round{r: r, epoch: epoch, outstanding: map[int]bool{}, initiator: init, probes: probes, push: push, started: time.Now()}
		msg := Msg{Kind: KindActivate, Round: r, Epoch: epoch, Rank: int32(init), Data: g.setParams}
		if push {
			msg.Step = 1
		}
		for _, m := range members {
			g.cur.outstanding[m] = true
			msg.Members = append(msg.Members, int32(m))
		}
		for _, p := range probes {
			msg.Probes = append(msg.Probes, int32(p))
		}
		for _, m := range members {
			_ = e.t.send(m, msg)
		}
	}
	// handle is the controller's reaction to one message.
	handle := func(msg Msg) {
		g := groupOf(msg.From)
		switch msg.Kind {
		case KindAck:
			// First reply wins; the others are expired (their probe
			// id is already the next round's).
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
			ended[msg.From] = true
			if g != nil && g.initiator < 0 {
				if i := slices.Index(g.probed, msg.From); i >= 0 {
					g.probed = slices.Delete(g.probed, i, i+1)
				}
			}
		case KindProfile:
			if !regrouped {
				profile[msg.From] = msg.Weight
			}
		case KindPush:
			// The parameter server: keep each group's newest model,
			// send the group the average of every group's newest.
			gi := slices.Index(groups, g)
			if gi < 0 || len(msg.Data) == 0 {
				break
			}
			latest[gi] = slices.Clone(msg.Data)
			g.setParams = averageModels(latest)
			log.Debug("straggle: model averaged", "group", gi, "groups_in_average", len(latest))
		case kindDeadEv:
			r := int(msg.Rank)
			dead[r] = true
			if g == nil {
				break
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
				if c := candidates(g); len(c) > 0 {
					probe(g, c[rng.IntN(len(c))])
				}
			}
		}
	}
	stopAll := func(why string) {
		log.Info("straggle: run over", "why", why, "rounds", total, "groups", len(groups))
		for w := range e.t.world {
			if w == e.rank || isLive(w) {
				_ = e.t.send(w, Msg{Kind: KindStop})
			}
		}
		e.stop()
	}

	// Messages other than State that come in during a takeover (an End,
	// say) are handled once it is done, never dropped.
	var later []Msg
	if takeover {
		// Ask every live worker where it is; re-run the newest round any
		// of them saw (the old controller may have died in it). Groups
		// are not rebuilt: the new controller runs one global ring.
		regrouped = true
		want := map[int]bool{}
		for _, w := range liveOf(e.cfg.Workers) {
			want[w] = true
			_ = e.t.send(w, Msg{Kind: KindSync})
		}
		var maxR uint64
		var maxE uint32
		deadline := time.After(e.cfg.Timeout)
	collect:
		for len(want) > 0 {
			select {
			case msg := <-e.t.ctrlIn:
				switch msg.Kind {
				case KindState:
					delete(want, msg.From)
					maxR, maxE = max(maxR, msg.Round), max(maxE, msg.Epoch)
					if msg.Weight == 1 {
						ended[msg.From] = true
					}
				case kindDeadEv:
					dead[int(msg.Rank)] = true
					delete(want, int(msg.Rank))
				default:
					later = append(later, msg)
				}
			case <-deadline:
				log.Warn("straggle: workers did not answer the takeover", "missing", keys(want))
				break collect
			case <-e.t.stop:
				return
			}
		}
		epoch = maxE + 1
		counter = maxR
		if maxR > 0 {
			// Round ids count every round activated so far: the rounds
			// before maxR are done, and --rounds still ends the run at
			// the same round id.
			total = int(maxR) - 1
			activate(groups[0], maxR, e.rank, nil, false)
		}
		log.Warn("straggle: controller took over", "round", maxR, "epoch", epoch)
	}
	for _, g := range groups {
		startProbing(g)
	}
	for _, msg := range later {
		handle(msg)
	}

	// No wait of the controller is unbounded. A probe nobody answers
	// expires after --probe-timeout, or after the mesh timeout when that
	// is 0 (the thesis never expires probes; a worker with a gradient
	// answers at once, so this only acts when probed workers are hung or
	// far slower than the timeout), and one more worker is probed. A
	// round not done by every member within the time its ring may take
	// (each of its 2(n−1) steps within the timeout) is retried under a
	// new epoch, naming the ranks that did not answer.
	probeExpiry := e.cfg.ProbeTimeout
	if probeExpiry <= 0 {
		probeExpiry = e.cfg.Timeout
	}
	roundLimit := func(g *group) time.Duration {
		return time.Duration(2*len(g.members)+1) * e.cfg.Timeout
	}
	tk := time.NewTicker(max(probeExpiry/4, 5*time.Millisecond))
	defer tk.Stop()
	tick := tk.C
	for {
		// rna-h: once every live worker has reported its iteration time
		// and no round is in flight, split into groups.
		if !regrouped {
			all := true
			for _, w := range liveOf(e.cfg.Workers) {
				if _, ok := profile[w]; !ok {
					all = false
				}
			}
			idle := true
			for _, g := range groups {
				idle = idle && g.cur == nil
			}
			if all && idle {
				regrouped = true
				parts := Partition(liveOf(e.cfg.Workers), profile)
				groups = nil
				for _, p := range parts {
					groups = append(groups, &group{members: p, initiator: -1, lastLoss: math.NaN()})
				}
				log.Info("straggle: rna-h groups from the profiled iteration times", "groups", parts, "iter_ms", profile)
				for _, g := range groups {
					startProbing(g)
				}
			}
		}
		// Progress every group as far as its state allows.
		anyLive, anyWork := false, false
		for gi, g := range groups {
			for {
				if g.cur != nil && g.cur.failed {
					epoch++
					log.Info("straggle: retrying round", "round", g.cur.r, "epoch", epoch, "live", liveOf(g.members))
					activate(g, g.cur.r, g.cur.initiator, g.cur.probes, g.cur.push)
					continue
				}
				if g.cur != nil && len(g.cur.outstanding) == 0 {
					g.completed++
					total++
					g.cur = nil
					if e.cfg.Rounds > 0 && total >= e.cfg.Rounds {
						stopAll("rounds")
						return
					}
					if e.cfg.TargetLoss > 0 && g.lastLoss <= e.cfg.TargetLoss {
						stopAll("target loss")
						return
					}
				}
				// Before the regroup (rna-h) no new round starts once
				// everyone has been profiled.
				holding := !regrouped && len(profile) >= len(liveOf(e.cfg.Workers))
				if g.cur == nil && g.initiator >= 0 && !holding {
					push := hier && regrouped && e.cfg.PSPeriod > 0 && len(groups) > 1 && (g.completed+1)%e.cfg.PSPeriod == 0
					activate(g, g.next, g.initiator, g.probed, push)
					g.setParams = nil
					startProbing(g)
					continue
				}
				if g.initiator < 0 && len(g.probed) == 0 {
					if c := candidates(g); len(c) > 0 {
						for _, i := range sim.Sample(rng, len(c), e.cfg.Probes) {
							probe(g, c[i])
						}
					}
				}
				break
			}
			_ = gi
			if len(liveOf(g.members)) > 0 {
				anyLive = true
			}
			if g.cur != nil || g.initiator >= 0 || len(g.probed) > 0 || len(candidates(g)) > 0 {
				anyWork = true
			}
		}
		if !anyLive {
			stopAll("no workers left")
			return
		}
		if !regrouped && len(profile) >= len(liveOf(e.cfg.Workers)) {
			idle := true
			for _, g := range groups {
				idle = idle && g.cur == nil
			}
			if idle {
				continue // regroup now
			}
		}
		if !anyWork {
			stopAll("every input ended")
			return
		}
		select {
		case <-e.t.stop:
			return
		case <-tick:
			for _, g := range groups {
				if g.initiator < 0 && len(g.probed) > 0 && time.Since(g.lastProbe) >= probeExpiry {
					if c := candidates(g); len(c) > 0 {
						p := c[rng.IntN(len(c))]
						if e.cfg.ProbeTimeout > 0 {
							log.Info("straggle: probe expired; probing one more worker", "round", g.next, "probed", g.probed, "added", p)
						} else {
							log.Warn("straggle: no probed worker answered within the timeout; probing one more worker", "round", g.next, "probed", g.probed, "added", p, "timeout", probeExpiry)
						}
						probe(g, p)
					} else {
						if e.cfg.ProbeTimeout == 0 {
							log.Warn("straggle: still waiting for a gradient from any probed worker", "round", g.next, "probed", g.probed, "waited", time.Since(g.lastProbe).Round(time.Millisecond))
						}
						g.lastProbe = time.Now()
					}
				}
				if g.cur != nil && !g.cur.failed && len(g.cur.outstanding) > 0 && time.Since(g.cur.started) > roundLimit(g) {
					log.Warn("straggle: round not done in time; retrying it without waiting for these ranks", "round", g.cur.r, "epoch", g.cur.epoch,
						"not_done", keys(g.cur.outstanding), "limit", roundLimit(g))
					g.cur.failed = true
				}
			}
		case msg := <-e.t.ctrlIn:
			handle(msg)
		}
	}
}

// averageModels is the element-wise mean of little-endian float32 models.
func averageModels(ms map[int][]byte) []byte {
	var n int
	var sum []float64
	for _, b := range ms {
		if sum == nil {
			sum = make([]float64, len(b)/4)
		}
		if len(b)/4 != len(sum) {
			continue
		}
		n++
		for i := range sum {
			sum[i] += float64(math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24))
		}
	}
	out := make([]byte, 4*len(sum))
	for i, s := range sum {
		u := math.Float32bits(float32(s / float64(n)))
		out[4*i], out[4*i+1], out[4*i+2], out[4*i+3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
	}
	return out
}

func keys(m map[int]bool) []int {
	var out []int
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
