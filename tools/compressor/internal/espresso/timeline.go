package espresso

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"

	"trainwire.dev/lib/costmodel"
)

// Grad is one gradient of the job, in backprop-ready order.
type Grad struct {
	Name  string
	Numel int64
	// ReadyNS is when its backprop produces it, from the start of the
	// backward pass; ComputeNS the backprop compute that produced it. A
	// job gives either (ready times, with compute 0 meaning "the gap since
	// the previous gradient"), or compute times alone (ready times 0: they
	// are the running sum).
	ReadyNS, ComputeNS float64
}

// Job is what the planner optimises: the gradients and the times around
// the backward pass.
type Job struct {
	Name      string
	Grads     []Grad
	ForwardNS float64
	UpdateNS  float64
}

// ErrInput is wrapped by every error about an inconsistent input.
var ErrInput = errors.New("espresso")

// Instance is a job priced on a cluster with a codec: the timeline model.
//
// The timeline (spec §3.4, the recommended discrete-event model with one
// simplification that makes it exact to evaluate in one pass): each
// resource — the GPU's compression stream, its intra-machine link, the
// machine's NIC, the two copy engines, and a pool of CPU workers — serves
// the gradients in backprop-ready order, each step starting at
// max(end of the gradient's previous step, the resource's free time) (one
// in-order stream per resource, as NCCL and BytePS issue collectives in
// ready order). Backprop kernels run in order on the GPU, kernel i no
// earlier than its measured start; a GPU compression or decompression
// runs when its stream is free and pre-empts backprop, so the kernel it
// lands in ends that much later (the GPU does the same total work:
// contention, [P] Fig. 2c). A gradient is ready when its kernel ends, and
// its first step can never start earlier. CPU steps use the first free
// worker and copy their input to the host and their output back.
// F(S) = forward + max(end of backprop, end of the last gradient's last
// step) + update.
type Instance struct {
	Cluster costmodel.Cluster
	Costs   Costs
	Tree    *Tree
	Job     Job

	n       int
	early   []float64 // earliest start of each backprop kernel
	compute []float64 // its duration
	class   []int     // size class of each gradient
	sizes   []int64   // distinct numels
	cache   [][]progSet
	zero    [][]progSet // with free compression
}

type progSet struct {
	progs []*prog
	errs  []error
}

// NewInstance checks the job and prepares the timeline model.
func NewInstance(job Job, cl costmodel.Cluster, c Costs, tree *Tree) (*Instance, error) {
	if len(job.Grads) == 0 {
		return nil, fmt.Errorf("%w: the job has no gradients", ErrInput)
	}
	if bad(job.ForwardNS) || bad(job.UpdateNS) {
		return nil, fmt.Errorf("%w: forward %g ns and update %g ns must be finite and non-negative", ErrInput, job.ForwardNS, job.UpdateNS)
	}
	if err := cl.Validate(c.CPU != nil); err != nil {
		return nil, err
	}
	if c.GPU == nil && c.CPU == nil {
		return nil, fmt.Errorf("%w: no compression time model on any device", ErrInput)
	}
	in := &Instance{Cluster: cl, Costs: c, Tree: tree, Job: job, n: len(job.Grads)}
	in.early = make([]float64, in.n)
	in.compute = make([]float64, in.n)
	in.class = make([]int, in.n)
	haveReady := false
	for _, g := range job.Grads {
		haveReady = haveReady || g.ReadyNS > 0
	}
	classOf := map[int64]int{}
	prev, run := 0.0, 0.0
	for i, g := range job.Grads {
		if g.Numel <= 0 {
			return nil, fmt.Errorf("%w: gradient %d (%s): numel %d must be positive", ErrInput, i, g.Name, g.Numel)
		}
		if bad(g.ReadyNS) || bad(g.ComputeNS) {
			return nil, fmt.Errorf("%w: gradient %d (%s): ready %g ns and compute %g ns must be finite and non-negative", ErrInput, i, g.Name, g.ReadyNS, g.ComputeNS)
		}
		if haveReady {
			if g.ReadyNS < prev {
				return nil, fmt.Errorf("%w: gradients out of order: gradient %d (%s) is ready at %.0f ns, before gradient %d (%s) at %.0f ns; a timing model lists gradients in backprop-ready order",
					ErrInput, i, g.Name, g.ReadyNS, i-1, job.Grads[i-1].Name, prev)
			}
			c := g.ComputeNS
			if c == 0 || c > g.ReadyNS-prev {
				c = g.ReadyNS - prev
			}
			in.compute[i], in.early[i] = c, g.ReadyNS-c
			prev = g.ReadyNS
		} else {
			in.compute[i], in.early[i] = g.ComputeNS, run
			run += g.ComputeNS
		}
		k, ok := classOf[g.Numel]
		if !ok {
			k = len(in.sizes)
			classOf[g.Numel] = k
			in.sizes = append(in.sizes, g.Numel)
		}
		in.class[i] = k
	}
	in.cache = make([][]progSet, len(in.sizes))
	in.zero = make([][]progSet, len(in.sizes))
	return in, nil
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x < 0 }

// N is the number of gradients.
func (in *Instance) N() int { return in.n }

// prog returns option o compiled for gradient i (cached per size), or an
// error when o is not available (a device without a time model).
func (in *Instance) prog(i int, o Option, zero bool) (*prog, error) {
	cache := in.cache
	if zero {
		cache = in.zero
	}
	k := in.class[i]
	if cache[k] == nil {
		cache[k] = make([]progSet, len(in.Tree.Paths))
	}
	ps := &cache[k][o.Path]
	if ps.progs == nil {
		n := 1 << in.Tree.Paths[o.Path].Ops()
		ps.progs, ps.errs = make([]*prog, n), make([]error, n)
	}
	if p := ps.progs[o.CPU]; p != nil {
		return p, nil
	}
	if err := ps.errs[o.CPU]; err != nil {
		return nil, err
	}
	p, err := compile(in.Cluster, in.Costs, in.Tree.Paths[o.Path], o.CPU, in.sizes[k], zero)
	if err != nil {
		ps.errs[o.CPU] = err
		return nil, err
	}
	ps.progs[o.CPU] = &p
	return &p, nil
}

// Available reports whether option o can price gradient i.
func (in *Instance) Available(i int, o Option) bool {
	_, err := in.prog(i, o, false)
	return err == nil
}

// insert is a GPU compression step on the GPU's timeline.
type insert struct{ s, d float64 }

// state is the timeline after some prefix of the gradients.
type state struct {
	free   [nRes]float64
	cpu    []float64
	bpEnd  float64
	maxEnd float64
	ins    []insert // GPU steps backprop has not met yet (from head on), by start
	head   int
	pushed []insert // the GPU steps of the last gradient stepped
}

func (in *Instance) newState() *state {
	return &state{cpu: make([]float64, max(in.Cluster.CPUWorkers, 1))}
}

func (st *state) copyFrom(o *state) {
	st.free, st.bpEnd, st.maxEnd = o.free, o.bpEnd, o.maxEnd
	st.cpu = append(st.cpu[:0], o.cpu...)
	n := len(o.ins) - o.head
	if cap(st.ins) < n {
		st.ins = make([]insert, n, 2*n+16)
	}
	st.ins, st.head = st.ins[:n], 0
	copy(st.ins, o.ins[o.head:])
	st.pushed = append(st.pushed[:0], o.pushed...)
}

// push adds a GPU step to the pending ones, kept sorted by start (they
// arrive nearly in order, so the insertion point is near the end).
func (st *state) push(x insert) {
	if len(st.ins) == cap(st.ins) && st.head > 0 {
		n := copy(st.ins, st.ins[st.head:])
		st.ins, st.head = st.ins[:n], 0
	}
	h := append(st.ins, x)
	i := len(h) - 1
	for i > st.head && h[i-1].s > x.s {
		h[i] = h[i-1]
		i--
	}
	h[i] = x
	st.ins = h
}

// pop removes the earliest pending GPU step.
func (st *state) pop() insert {
	x := st.ins[st.head]
	st.head++
	return x
}

// pending is the number of GPU steps backprop has not met yet.
func (st *state) pending() int { return len(st.ins) - st.head }

// stepTimes receives the start and end of every op of a gradient.
type stepTimes func(o op, start, end float64)

// step advances the timeline by gradient i under program p and returns
// when its backprop kernel ended (its ready time) and its last step ended.
func (in *Instance) step(st *state, i int, p *prog, rec stepTimes) (ready, end float64) {
	b := fmax(in.early[i], st.bpEnd)
	for st.pending() > 0 && st.ins[st.head].s < b {
		x := st.pop()
		b = fmax(b, x.s+x.d)
	}
	e := b + in.compute[i]
	for st.pending() > 0 && st.ins[st.head].s < e {
		e += st.pop().d
	}
	st.bpEnd = e
	st.pushed = st.pushed[:0]
	t := e
	for _, o := range p.ops {
		var s float64
		if o.mask == 1<<resCPU {
			w := 0
			for j, f := range st.cpu {
				if f < st.cpu[w] {
					w = j
				}
			}
			s = fmax(t, st.cpu[w])
			st.cpu[w] = s + o.dur
		} else if o.mask&(o.mask-1) == 0 {
			r := bits.TrailingZeros8(o.mask)
			s = fmax(t, st.free[r])
			st.free[r] = s + o.dur
			if r == resGPU {
				st.push(insert{s, o.dur})
				st.pushed = append(st.pushed, insert{s, o.dur})
			}
		} else {
			s = t
			for r := range resCPU {
				if o.mask&(1<<r) != 0 {
					s = fmax(s, st.free[r])
				}
			}
			for r := range resCPU {
				if o.mask&(1<<r) != 0 {
					st.free[r] = s + o.dur
				}
			}
		}
		if rec != nil {
			rec(o, s, s+o.dur)
		}
		t = s + o.dur
	}
	st.maxEnd = fmax(st.maxEnd, t)
	return e, t
}

// fmax is max for the timeline's finite, non-negative times (math.Max
// also orders NaNs and signed zeros, which costs a third of the timeline).
func fmax(a, b float64) float64 {
	if a > b {
		return a
	}
	return b
}

// dominates reports whether the state a after stepping gradient i is at
// least as late as b after stepping the same gradient from the same
// state with another option: every resource free no earlier, as much
// ended, and at least as much GPU work added. The max-plus part of the
// timeline is monotone, so a cannot then end earlier — except through
// pre-emption (where a GPU step lands in backprop can move later kernels
// either way), which makes this a close approximation rather than a
// theorem; Options.NoDominance turns it off, and the tests compare.
func dominates(a, b *state) bool {
	if a.maxEnd < b.maxEnd || a.bpEnd < b.bpEnd {
		return false
	}
	for r := range resCPU {
		if a.free[r] < b.free[r] {
			return false
		}
	}
	if len(a.cpu) > 1 {
		var ab, bb [16]float64
		ac, bc := append(ab[:0], a.cpu...), append(bb[:0], b.cpu...)
		slices.Sort(ac)
		slices.Sort(bc)
		for k := range ac {
			if ac[k] < bc[k] {
				return false
			}
		}
	} else if a.cpu[0] < b.cpu[0] {
		return false
	}
	// a adds at least as much GPU work after the gradient's kernel as b
	var wa, wb float64
	for _, x := range a.pushed {
		wa += x.d
	}
	for _, x := range b.pushed {
		wb += x.d
	}
	return wa >= wb
}

// total is F for a state after the last gradient.
func (in *Instance) total(st *state) float64 {
	return in.Job.ForwardNS + math.Max(st.bpEnd, st.maxEnd) + in.Job.UpdateNS
}

// progs resolves a strategy.
func (in *Instance) progs(s []Option, zero bool) ([]*prog, error) {
	if len(s) != in.n {
		return nil, fmt.Errorf("%w: strategy has %d options for %d gradients", ErrInput, len(s), in.n)
	}
	ps := make([]*prog, in.n)
	for i, o := range s {
		if o.Path < 0 || o.Path >= len(in.Tree.Paths) || o.CPU >= 1<<in.Tree.Paths[o.Path].Ops() {
			return nil, fmt.Errorf("%w: gradient %d: option %+v is not in the tree", ErrInput, i, o)
		}
		p, err := in.prog(i, o, zero)
		if err != nil {
			return nil, fmt.Errorf("%w: gradient %d (%s): option %s: %v", ErrInput, i, in.Job.Grads[i].Name, in.Tree.Format(o), err)
		}
		ps[i] = p
	}
	return ps, nil
}

// F is the predicted iteration time of strategy s in nanoseconds.
func (in *Instance) F(s []Option) (float64, error) {
	ps, err := in.progs(s, false)
	if err != nil {
		return 0, err
	}
	return in.run(ps), nil
}

// FreeCompression is F(s) with every compression and decompression taking
// no time: the paper's Upper Bound for this strategy.
func (in *Instance) FreeCompression(s []Option) (float64, error) {
	ps, err := in.progs(s, true)
	if err != nil {
		return 0, err
	}
	return in.run(ps), nil
}

func (in *Instance) run(ps []*prog) float64 {
	st := in.newState()
	for i, p := range ps {
		in.step(st, i, p, nil)
	}
	return in.total(st)
}

// StepTime is one timed step of a gradient's option.
type StepTime struct {
	// Step is the option's step ("I1:RS", "C@gpu"), or "D2H"/"H2D" for a
	// copy the option implies.
	Step     string
	Resource string
	StartNS  float64
	EndNS    float64
}

// GradTime is a gradient's timeline: when it was ready, when its first
// step started and its last ended, and every step.
type GradTime struct {
	ReadyNS, StartNS, EndNS float64
	Steps                   []StepTime
}

// Timeline is the whole predicted iteration.
type Timeline struct {
	// Grads are relative to the start of the backward pass.
	Grads   []GradTime
	BPEndNS float64
	SyncEnd float64
	IterNS  float64
	// Bubbles are the gradients that became ready with every earlier
	// gradient's last step done.
	Bubbles    []int
	LastBubble int // the last of them (0 when none)
}

// Trace computes strategy s's timeline.
func (in *Instance) Trace(s []Option) (*Timeline, error) {
	ps, err := in.progs(s, false)
	if err != nil {
		return nil, err
	}
	st := in.newState()
	tl := &Timeline{Grads: make([]GradTime, in.n)}
	maxPrev := 0.0
	for i, p := range ps {
		path := in.Tree.Paths[s[i].Path]
		gt := &tl.Grads[i]
		first := true
		rec := func(o op, a, b float64) {
			if first {
				gt.StartNS, first = a, false
			}
			name := "H2D"
			if o.mask == 1<<resD2H {
				name = "D2H"
			}
			if o.step >= 0 {
				name = path.Steps[o.step].String()
				if k := path.Steps[o.step].Kind; k != Comm {
					dev := "@gpu"
					if o.mask == 1<<resCPU {
						dev = "@cpu"
					}
					name += dev
				}
			}
			var rs []string
			for r := range nRes {
				if o.mask&(1<<r) != 0 {
					rs = append(rs, resNames[r])
				}
			}
			gt.Steps = append(gt.Steps, StepTime{Step: name, Resource: joinPlus(rs), StartNS: a, EndNS: b})
		}
		gt.ReadyNS, gt.EndNS = in.step(st, i, p, rec)
		if first {
			gt.StartNS = gt.ReadyNS
		}
		if i > 0 && gt.ReadyNS >= maxPrev {
			tl.Bubbles = append(tl.Bubbles, i)
			tl.LastBubble = i
		}
		maxPrev = math.Max(maxPrev, gt.EndNS)
	}
	tl.BPEndNS, tl.SyncEnd, tl.IterNS = st.bpEnd, st.maxEnd, in.total(st)
	return tl, nil
}

func joinPlus(s []string) string {
	out := ""
	for i, x := range s {
		if i > 0 {
			out += "+"
		}
		out += x
	}
	return out
}

// lastBubble is the index b* of the last gradient that became ready with
// every earlier gradient's communication finished (a new busy period,
// spec §4.3, with [A]'s ≥); 0 when there is none. Gradients before it are
// "communicated before a bubble".
func (in *Instance) lastBubble(ps []*prog) int {
	st := in.newState()
	maxPrev, last := 0.0, 0
	for i, p := range ps {
		ready, end := in.step(st, i, p, nil)
		if i > 0 && ready >= maxPrev {
			last = i
		}
		maxPrev = math.Max(maxPrev, end)
	}
	return last
}

// Uniform is the strategy that gives every gradient option o.
func Uniform(n int, o Option) []Option {
	s := make([]Option, n)
	for i := range s {
		s[i] = o
	}
	return s
}
