package analysis

import (
	"math"
	"sort"
	"strconv"
	"strings"

	"trainwire.dev/tools/profiler/internal/classify"
	"trainwire.dev/tools/profiler/internal/interval"
)

// Options tune the analyses.
type Options struct {
	// KernelWaitNS: a gap on a lane shorter than this, with the next
	// event launched in time, is kernel wait (HTA's
	// consecutive_kernel_delay, 30 µs).
	KernelWaitNS int64
	// TopK kernels per class in the kernel breakdown.
	TopK int
	// RuntimeCutoffNS and LaunchDelayCutoffNS flag launch outliers.
	RuntimeCutoffNS     int64
	LaunchDelayCutoffNS int64
	// MemPoints bounds the memory timeline's points per device.
	MemPoints int
}

// DefaultOptions are HTA's defaults.
var DefaultOptions = Options{KernelWaitNS: 30_000, TopK: 5, RuntimeCutoffNS: 50_000, LaunchDelayCutoffNS: 100_000, MemPoints: 200}

// Summary is every analysis of a set of ranks.
type Summary struct {
	Ranks       []RankSummary    `json:"ranks"`
	Collectives *CollectiveStats `json:"collectives,omitempty"`
	Stragglers  []Straggler      `json:"stragglers,omitempty"`
	Negotiation *Negotiation     `json:"negotiation,omitempty"`
}

// RankSummary is one rank's analyses.
type RankSummary struct {
	Rank    int64            `json:"rank"`
	Files   []string         `json:"files"`
	Format  string           `json:"format"`
	Clock   string           `json:"clock"`
	Device  string           `json:"device"` // "gpu" or "cpu": which events make the timeline
	Events  int64            `json:"events"`
	Skipped map[string]int64 `json:"skipped,omitempty"`
	// Unterminated: the trace's array had no closing bracket.
	Unterminated bool             `json:"unterminated,omitempty"`
	Iterations   IterStats        `json:"iterations"`
	Temporal     Temporal         `json:"temporal"`
	Overlap      Overlap          `json:"overlap"`
	Idle         []IdleLane       `json:"idle"`
	Classes      []ClassTotal     `json:"classes"`
	Kernels      []KernelStat     `json:"kernels"`
	Launch       *LaunchStats     `json:"launch,omitempty"`
	Memory       []MemoryTimeline `json:"memory,omitempty"`
}

// IterStats describe ProfilerStep spans.
type IterStats struct {
	Count  int     `json:"count"`
	MeanNS int64   `json:"mean_ns"`
	MinNS  int64   `json:"min_ns"`
	MaxNS  int64   `json:"max_ns"`
	CV     float64 `json:"cv"`
}

// Temporal is HTA's temporal breakdown over the device timeline.
type Temporal struct {
	SpanNS        int64   `json:"span_ns"` // end of the last event − start of the first
	BusyNS        int64   `json:"busy_ns"`
	IdleNS        int64   `json:"idle_ns"`
	ComputeNS     int64   `json:"compute_ns"`
	NonComputeNS  int64   `json:"non_compute_ns"` // busy, not under compute
	CommNS        int64   `json:"comm_ns"`
	MemoryNS      int64   `json:"memory_ns"`
	IdlePct       float64 `json:"idle_pct"`
	ComputePct    float64 `json:"compute_pct"`
	NonComputePct float64 `json:"non_compute_pct"`
}

// Overlap is |comm ∩ compute| / |comm|.
type Overlap struct {
	CommNS    int64    `json:"comm_ns"`
	OverlapNS int64    `json:"overlap_ns"`
	Pct       *float64 `json:"pct"` // null when there is no communication
}

// IdleLane splits one lane's idle time.
type IdleLane struct {
	Lane         string `json:"lane"`
	HostWaitNS   int64  `json:"host_wait_ns"`
	KernelWaitNS int64  `json:"kernel_wait_ns"`
	OtherNS      int64  `json:"other_ns"`
	Gaps         int    `json:"gaps"`
}

// ClassTotal is the summed duration of one class.
type ClassTotal struct {
	Class string  `json:"class"`
	Count int     `json:"count"`
	SumNS int64   `json:"sum_ns"`
	Pct   float64 `json:"pct"`
}

// KernelStat describes one event name.
type KernelStat struct {
	Name   string  `json:"name"`
	Class  string  `json:"class"`
	Count  int     `json:"count"`
	SumNS  int64   `json:"sum_ns"`
	MinNS  int64   `json:"min_ns"`
	MaxNS  int64   `json:"max_ns"`
	MeanNS float64 `json:"mean_ns"`
	StdNS  float64 `json:"std_ns"`
}

// LaunchStats pair runtime launches with their kernels (by correlation).
type LaunchStats struct {
	Pairs        int     `json:"pairs"`
	CPUMeanNS    float64 `json:"cpu_mean_ns"`
	GPUMeanNS    float64 `json:"gpu_mean_ns"`
	DelayMeanNS  float64 `json:"launch_delay_mean_ns"`
	DelayMaxNS   int64   `json:"launch_delay_max_ns"`
	ShortKernels int     `json:"short_kernels"` // gpu dur < cpu dur
	// NegativeDelays counts kernels that started before their launch call
	// ended (clock skew between host and device): their delay counts as 0,
	// as HTA clips it, instead of pulling the mean below zero.
	NegativeDelays      int `json:"negative_delays"`
	RuntimeOutliers     int `json:"runtime_outliers"`
	LaunchDelayOutliers int `json:"launch_delay_outliers"`
}

// Summarize runs every analysis.
func Summarize(ranks []*Rank, o Options) *Summary {
	s := &Summary{}
	for _, r := range ranks {
		s.Ranks = append(s.Ranks, summarizeRank(r, o))
	}
	s.Collectives, s.Stragglers = matchCollectives(ranks)
	s.Negotiation = negotiation(ranks)
	return s
}

// timeline returns the spans that make the rank's device timeline:
// device-stream events when there are any, else every CPU op and
// communication span (annotations, runtime calls and instants excluded).
func timeline(r *Rank) ([]*Span, string) {
	gpu := r.HasGPU()
	var out []*Span
	for i := range r.Spans {
		s := &r.Spans[i]
		if gpu && !s.GPU {
			continue
		}
		switch s.Class {
		case classify.Annotation, classify.Runtime, classify.Other:
			continue
		}
		out = append(out, s)
	}
	if gpu {
		return out, "gpu"
	}
	return out, "cpu"
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return math.Round(float64(a)/float64(b)*1e6) / 1e4
}

func summarizeRank(r *Rank, o Options) RankSummary {
	tl, dev := timeline(r)
	rs := RankSummary{Rank: r.Rank, Files: r.Files, Format: string(r.Format), Clock: r.Clock, Device: dev,
		Events: r.Events, Unterminated: r.Unterminated}
	if len(r.Skipped) > 0 {
		rs.Skipped = r.Skipped
	}
	rs.Iterations = iterStats(r.Steps)

	var all, comp, comm, mem []interval.I
	first, last := int64(math.MaxInt64), int64(math.MinInt64)
	for _, s := range tl {
		iv := interval.I{S: s.TS, E: s.End}
		all = append(all, iv)
		first, last = min(first, s.TS), max(last, s.End)
		switch s.Class {
		case classify.Compute:
			comp = append(comp, iv)
		case classify.Comm:
			comm = append(comm, iv)
		case classify.Memory:
			mem = append(mem, iv)
		}
	}
	t := &rs.Temporal
	if len(tl) > 0 {
		ua, uc, um, umem := interval.Union(all), interval.Union(comp), interval.Union(comm), interval.Union(mem)
		t.SpanNS = last - first
		t.BusyNS = interval.Total(ua)
		t.IdleNS = t.SpanNS - t.BusyNS
		t.ComputeNS = interval.Total(uc)
		t.NonComputeNS = t.SpanNS - t.ComputeNS - t.IdleNS
		t.CommNS = interval.Total(um)
		t.MemoryNS = interval.Total(umem)
		t.IdlePct, t.ComputePct, t.NonComputePct = pct(t.IdleNS, t.SpanNS), pct(t.ComputeNS, t.SpanNS), pct(t.NonComputeNS, t.SpanNS)
		rs.Overlap.CommNS = t.CommNS
		rs.Overlap.OverlapNS = interval.Total(interval.Intersect(um, uc))
		if t.CommNS > 0 {
			p := pct(rs.Overlap.OverlapNS, t.CommNS)
			rs.Overlap.Pct = &p
		}
	}
	rs.Idle = idle(r, tl, o)
	rs.Classes, rs.Kernels = breakdown(tl, o.TopK)
	if dev == "gpu" {
		rs.Launch = launch(r, tl, o)
	}
	rs.Memory = memory(r, o)
	return rs
}

func iterStats(steps []Span) IterStats {
	st := IterStats{Count: len(steps)}
	if len(steps) == 0 {
		return st
	}
	var sum, sq float64
	st.MinNS = math.MaxInt64
	for _, s := range steps {
		d := s.Dur()
		sum += float64(d)
		sq += float64(d) * float64(d)
		st.MinNS, st.MaxNS = min(st.MinNS, d), max(st.MaxNS, d)
	}
	n := float64(len(steps))
	mean := sum / n
	st.MeanNS = int64(math.Round(mean))
	if mean > 0 {
		st.CV = round4(math.Sqrt(max(0, sq/n-mean*mean)) / mean)
	}
	return st
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// idle splits the gaps of every lane: host wait when the next event's
// launch started after the previous event ended (the CPU was late),
// kernel wait when the gap is short, other otherwise. Nested events on a
// lane (CPU ops) are merged first.
func idle(r *Rank, tl []*Span, o Options) []IdleLane {
	byLane := map[int][]*Span{}
	for _, s := range tl {
		byLane[s.Lane] = append(byLane[s.Lane], s)
	}
	lanes := make([]int, 0, len(byLane))
	for l := range byLane {
		lanes = append(lanes, l)
	}
	sort.Slice(lanes, func(i, j int) bool { return laneLess(r.Lanes[lanes[i]], r.Lanes[lanes[j]]) })
	var out []IdleLane
	for _, l := range lanes {
		ss := byLane[l]
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].TS < ss[j].TS })
		il := IdleLane{Lane: r.Lanes[l]}
		end := int64(math.MinInt64)
		for _, s := range ss {
			if end != math.MinInt64 && s.TS > end {
				gap := s.TS - end
				il.Gaps++
				rt, ok := r.Runtime[s.Corr]
				switch {
				case ok && s.Corr >= 0 && rt.TS > end:
					il.HostWaitNS += gap
				case gap < o.KernelWaitNS:
					il.KernelWaitNS += gap
				default:
					il.OtherNS += gap
				}
			}
			end = max(end, s.End)
		}
		out = append(out, il)
	}
	return out
}

func breakdown(tl []*Span, topK int) ([]ClassTotal, []KernelStat) {
	type acc struct {
		KernelStat
		sq float64
	}
	byName := map[string]*acc{}
	var classes [classify.NClasses]ClassTotal
	var total int64
	for _, s := range tl {
		d := s.Dur()
		classes[s.Class].Count++
		classes[s.Class].SumNS += d
		total += d
		a := byName[s.Name]
		if a == nil {
			a = &acc{KernelStat: KernelStat{Name: s.Name, Class: s.Class.String(), MinNS: math.MaxInt64}}
			byName[s.Name] = a
		}
		a.Count++
		a.SumNS += d
		a.MinNS, a.MaxNS = min(a.MinNS, d), max(a.MaxNS, d)
		a.sq += float64(d) * float64(d)
	}
	var ct []ClassTotal
	for c := range classes {
		if classes[c].Count == 0 {
			continue
		}
		x := classes[c]
		x.Class = classify.Class(c).String()
		x.Pct = pct(x.SumNS, total)
		ct = append(ct, x)
	}
	byClass := map[string][]KernelStat{}
	for _, a := range byName {
		n := float64(a.Count)
		a.MeanNS = float64(a.SumNS) / n
		a.StdNS = math.Round(math.Sqrt(max(0, a.sq/n-a.MeanNS*a.MeanNS))*100) / 100
		a.MeanNS = math.Round(a.MeanNS*100) / 100
		byClass[a.Class] = append(byClass[a.Class], a.KernelStat)
	}
	var ks []KernelStat
	for _, c := range ct {
		l := byClass[c.Class]
		sort.Slice(l, func(i, j int) bool {
			if l[i].SumNS != l[j].SumNS {
				return l[i].SumNS > l[j].SumNS
			}
			return l[i].Name < l[j].Name
		})
		if topK > 0 && len(l) > topK {
			l = l[:topK]
		}
		ks = append(ks, l...)
	}
	return ct, ks
}

func launch(r *Rank, tl []*Span, o Options) *LaunchStats {
	ls := &LaunchStats{}
	var cpu, gpu, delay float64
	for _, s := range tl {
		rt, ok := r.Runtime[s.Corr]
		if !ok || s.Corr < 0 {
			continue
		}
		ls.Pairs++
		cd, gd, dl := rt.Dur(), s.Dur(), s.TS-rt.End
		if dl < 0 {
			ls.NegativeDelays++
			dl = 0
		}
		cpu += float64(cd)
		gpu += float64(gd)
		delay += float64(dl)
		ls.DelayMaxNS = max(ls.DelayMaxNS, dl)
		if gd < cd {
			ls.ShortKernels++
		}
		if cd > o.RuntimeCutoffNS {
			ls.RuntimeOutliers++
		}
		if dl > o.LaunchDelayCutoffNS {
			ls.LaunchDelayOutliers++
		}
	}
	if ls.Pairs == 0 {
		return nil
	}
	n := float64(ls.Pairs)
	ls.CPUMeanNS, ls.GPUMeanNS, ls.DelayMeanNS = math.Round(cpu/n*100)/100, math.Round(gpu/n*100)/100, math.Round(delay/n*100)/100
	return ls
}

// CollectiveStats match collectives across ranks.
type CollectiveStats struct {
	// MatchedBy is "seq" (process group and sequence number) or "order"
	// (the k-th collective of each op on each rank).
	MatchedBy string `json:"matched_by"`
	Clock     string `json:"clock"`
	Matched   int    `json:"matched"`
	// Unmatched counts collectives seen on fewer ranks than the others.
	Unmatched     int              `json:"unmatched"`
	StartSkewMean float64          `json:"start_skew_mean_ns"`
	StartSkewMax  int64            `json:"start_skew_max_ns"`
	EndSkewMean   float64          `json:"end_skew_mean_ns"`
	EndSkewMax    int64            `json:"end_skew_max_ns"`
	Ops           []CollectiveOp   `json:"ops"`
	Instances     []CollectiveInst `json:"instances,omitempty"`
}

// CollectiveOp aggregates one operation and size.
type CollectiveOp struct {
	Op        string  `json:"op"`
	Bytes     int64   `json:"bytes"`
	Count     int     `json:"count"`
	TimeNS    float64 `json:"time_mean_ns"`
	AlgBWGBps float64 `json:"algbw_gbps"`
	BusBWGBps float64 `json:"busbw_gbps"`
}

// CollectiveInst is one collective matched across ranks.
type CollectiveInst struct {
	Key         string  `json:"key"`
	Op          string  `json:"op"`
	Bytes       int64   `json:"bytes"`
	Ranks       int     `json:"ranks"`
	StartSkewNS int64   `json:"start_skew_ns"`
	EndSkewNS   int64   `json:"end_skew_ns"`
	TimeNS      int64   `json:"time_ns"`
	LastStarter int64   `json:"last_starter"`
	AlgBWGBps   float64 `json:"algbw_gbps"`
	BusBWGBps   float64 `json:"busbw_gbps"`
}

// Straggler ranks a rank by how long the others waited for it.
type Straggler struct {
	Rank int64 `json:"rank"`
	// WaitCausedNS is the mean over collectives of (longest duration −
	// this rank's duration): blocking collectives end together, so the
	// rank that arrives last has the shortest one and the others wait
	// for it. It needs no common clock.
	WaitCausedNS float64 `json:"wait_caused_mean_ns"`
	// LastStarts counts collectives this rank started last (absolute
	// clocks only).
	LastStarts  int `json:"last_starts"`
	Collectives int `json:"collectives"`
}

// OpName normalizes a collective's operation name.
func OpName(s *Span) string {
	if s.Coll != "" {
		return strings.ToLower(s.Coll)
	}
	n := strings.ToLower(s.Name)
	for _, op := range []string{"allreduce", "all_reduce", "allgather", "all_gather", "reducescatter", "reduce_scatter",
		"alltoall", "all_to_all", "broadcast", "bcast", "sendrecv", "send", "recv", "reduce", "barrier"} {
		if strings.Contains(n, op) {
			return strings.ReplaceAll(strings.ReplaceAll(op, "_", ""), "bcast", "broadcast")
		}
	}
	return n
}

// BusFactor is nccl-tests' bus-bandwidth factor for an op over n ranks.
func BusFactor(op string, n int) float64 {
	if n <= 1 {
		return 1
	}
	f := float64(n)
	switch op {
	case "allreduce":
		return 2 * (f - 1) / f
	case "allgather", "reducescatter", "alltoall":
		return (f - 1) / f
	}
	return 1
}

func matchCollectives(ranks []*Rank) (*CollectiveStats, []Straggler) {
	if len(ranks) < 2 {
		return nil, nil
	}
	cg := groupCollectives(ranks)
	if cg == nil {
		return nil, nil
	}
	acc := &collAcc{cs: &CollectiveStats{MatchedBy: "order", Clock: cg.clock}, ops: map[[2]string]*opAcc{},
		wait: map[int64]float64{}, cnt: map[int64]int{}, last: map[int64]int{}}
	if cg.bySeq {
		acc.cs.MatchedBy = "seq"
	}
	for _, k := range cg.keys {
		g := cg.groups[k]
		if len(g) < len(ranks) {
			acc.cs.Unmatched++
			continue
		}
		acc.add(k, g)
	}
	return acc.stats(), acc.stragglers(ranks)
}

// collInst is one rank's span of a collective.
type collInst struct {
	rank int64
	s    *Span
}

// collGroups is every rank's collectives grouped into instances: by
// process group and sequence number when every span has them, else by op
// and order of appearance; keys in first-seen order.
type collGroups struct {
	groups map[string][]collInst
	keys   []string
	bySeq  bool
	clock  string // absolute when every rank's clock is
}

// groupCollectives groups the ranks' collectives (nil when there are none).
func groupCollectives(ranks []*Rank) *collGroups {
	bySeq := true
	per := make([][]int, len(ranks))
	any := false
	for i, r := range ranks {
		per[i] = r.Collectives()
		for _, j := range per[i] {
			any = true
			if r.Spans[j].Seq < 0 || r.Spans[j].PG == "" {
				bySeq = false
			}
		}
	}
	if !any {
		return nil
	}
	cg := &collGroups{groups: map[string][]collInst{}, bySeq: bySeq, clock: "absolute"}
	for i, r := range ranks {
		if r.Clock != "absolute" {
			cg.clock = "relative"
		}
		ord := map[string]int{}
		for _, j := range per[i] {
			s := &r.Spans[j]
			op := OpName(s)
			var key string
			if bySeq {
				key = "pg " + s.PG + " seq " + strconv.FormatInt(s.Seq, 10) + " " + op
			} else {
				key = op + " #" + strconv.Itoa(ord[op])
				ord[op]++
			}
			if _, ok := cg.groups[key]; !ok {
				cg.keys = append(cg.keys, key)
			}
			cg.groups[key] = append(cg.groups[key], collInst{r.Rank, s})
		}
	}
	return cg
}

// opAcc sums the instances of one (op, bytes).
type opAcc struct {
	n     int
	t     float64
	bytes int64
	nr    int
}

// collAcc accumulates the matched instances: the stats, per (op, bytes)
// sums, and per rank the wait it caused, its instances and how often it
// started last.
type collAcc struct {
	cs         *CollectiveStats
	ops        map[[2]string]*opAcc
	opKeys     [][2]string
	wait       map[int64]float64
	cnt        map[int64]int
	last       map[int64]int
	sSum, eSum float64
}

// add takes one instance matched on every rank.
func (a *collAcc) add(key string, g []collInst) {
	cs := a.cs
	cs.Matched++
	ci, maxDur := instOf(key, g, cs.Clock)
	for _, x := range g {
		a.wait[x.rank] += float64(maxDur - x.s.Dur())
		a.cnt[x.rank]++
	}
	if cs.Clock == "absolute" {
		a.last[ci.LastStarter]++
	}
	a.sSum += float64(ci.StartSkewNS)
	a.eSum += float64(ci.EndSkewNS)
	cs.StartSkewMax, cs.EndSkewMax = max(cs.StartSkewMax, ci.StartSkewNS), max(cs.EndSkewMax, ci.EndSkewNS)
	ok := [2]string{ci.Op, strconv.FormatInt(ci.Bytes, 10)}
	o := a.ops[ok]
	if o == nil {
		o = &opAcc{bytes: ci.Bytes, nr: len(g)}
		a.ops[ok] = o
		a.opKeys = append(a.opKeys, ok)
	}
	o.n++
	o.t += float64(ci.TimeNS)
	cs.Instances = append(cs.Instances, ci)
}

// instOf is one matched instance: who started last, skews, size, time and
// bandwidth; and its longest duration on any rank.
func instOf(key string, g []collInst, clock string) (CollectiveInst, int64) {
	ci := CollectiveInst{Key: key, Op: OpName(g[0].s), Ranks: len(g)}
	minS, maxS, minE, maxE := int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64), int64(math.MinInt64)
	var maxDur int64
	for _, x := range g {
		if x.s.TS > maxS {
			maxS, ci.LastStarter, ci.TimeNS = x.s.TS, x.rank, x.s.Dur()
		}
		minS, minE, maxE = min(minS, x.s.TS), min(minE, x.s.End), max(maxE, x.s.End)
		maxDur = max(maxDur, x.s.Dur())
		ci.Bytes = max(ci.Bytes, x.s.Bytes)
	}
	ci.StartSkewNS, ci.EndSkewNS = maxS-minS, maxE-minE
	if clock != "absolute" {
		// no common clock: the collective's own time is the shortest
		// duration (the last arrival waited for nobody)
		ci.TimeNS = math.MaxInt64
		for _, x := range g {
			ci.TimeNS = min(ci.TimeNS, x.s.Dur())
		}
	}
	if ci.Bytes > 0 && ci.TimeNS > 0 {
		ci.AlgBWGBps = round4(float64(ci.Bytes) / float64(ci.TimeNS))
		ci.BusBWGBps = round4(ci.AlgBWGBps * BusFactor(ci.Op, len(g)))
	}
	return ci, maxDur
}

// stats completes the stats: mean skews and the per-op table.
func (a *collAcc) stats() *CollectiveStats {
	cs := a.cs
	if cs.Matched > 0 {
		cs.StartSkewMean = math.Round(a.sSum / float64(cs.Matched))
		cs.EndSkewMean = math.Round(a.eSum / float64(cs.Matched))
	}
	for _, k := range a.opKeys {
		o := a.ops[k]
		op := CollectiveOp{Op: k[0], Bytes: o.bytes, Count: o.n, TimeNS: math.Round(o.t / float64(o.n))}
		if o.bytes > 0 && op.TimeNS > 0 {
			op.AlgBWGBps = round4(float64(o.bytes) / op.TimeNS)
			op.BusBWGBps = round4(op.AlgBWGBps * BusFactor(k[0], o.nr))
		}
		cs.Ops = append(cs.Ops, op)
	}
	return cs
}

// stragglers ranks the ranks by the wait they caused the others (mean per
// collective), then by how often they started last.
func (a *collAcc) stragglers(ranks []*Rank) []Straggler {
	var st []Straggler
	for _, r := range ranks {
		if a.cnt[r.Rank] == 0 {
			continue
		}
		st = append(st, Straggler{Rank: r.Rank, WaitCausedNS: math.Round(a.wait[r.Rank] / float64(a.cnt[r.Rank])),
			LastStarts: a.last[r.Rank], Collectives: a.cnt[r.Rank]})
	}
	sort.SliceStable(st, func(i, j int) bool {
		if st[i].WaitCausedNS != st[j].WaitCausedNS {
			return st[i].WaitCausedNS > st[j].WaitCausedNS
		}
		return st[i].LastStarts > st[j].LastStarts
	})
	return st
}

// Negotiation summarizes Horovod's readiness ticks: per tensor and cycle,
// which rank reported ready last, and how long after the first.
type Negotiation struct {
	Rounds int               `json:"rounds"`
	Ranks  []NegotiationRank `json:"ranks"`
}

// NegotiationRank is one rank's readiness record.
type NegotiationRank struct {
	Rank       int64   `json:"rank"`
	Last       int     `json:"last"`         // rounds this rank reported last
	LateMeanNS float64 `json:"late_mean_ns"` // mean delay behind the first rank
}

func negotiation(ranks []*Rank) *Negotiation {
	var ticks []Tick
	for _, r := range ranks {
		ticks = append(ticks, r.Ticks...)
	}
	if len(ticks) == 0 {
		return nil
	}
	// a round is the run of ticks of one tensor between two of its
	// negotiations: group consecutive ticks per tensor until a rank repeats
	type round struct {
		first int64
		seen  map[int64]int64
	}
	open := map[string]*round{}
	late := map[int64]float64{}
	n := map[int64]int{}
	lastCnt := map[int64]int{}
	ng := &Negotiation{}
	flush := func(rd *round) {
		ng.Rounds++
		var lr, lt int64 = -1, math.MinInt64
		for rk, ts := range rd.seen {
			late[rk] += float64(ts - rd.first)
			n[rk]++
			if ts > lt || (ts == lt && rk < lr) {
				lr, lt = rk, ts
			}
		}
		lastCnt[lr]++
	}
	for _, t := range ticks {
		rd := open[t.Tensor]
		if rd != nil {
			if _, dup := rd.seen[t.Rank]; dup {
				flush(rd)
				rd = nil
			}
		}
		if rd == nil {
			rd = &round{first: t.TS, seen: map[int64]int64{}}
			open[t.Tensor] = rd
		}
		rd.seen[t.Rank] = t.TS
	}
	names := make([]string, 0, len(open))
	for k := range open {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		flush(open[k])
	}
	for rk := range n {
		ng.Ranks = append(ng.Ranks, NegotiationRank{Rank: rk, Last: lastCnt[rk], LateMeanNS: math.Round(late[rk] / float64(n[rk]))})
	}
	sort.Slice(ng.Ranks, func(i, j int) bool {
		if ng.Ranks[i].LateMeanNS != ng.Ranks[j].LateMeanNS {
			return ng.Ranks[i].LateMeanNS > ng.Ranks[j].LateMeanNS
		}
		return ng.Ranks[i].Rank < ng.Ranks[j].Rank
	})
	return ng
}

// laneLess orders lane names with their numbers in numeric order
// ("stream 7" < "stream 20", "thread 2" < "thread 10").
func laneLess(a, b string) bool {
	if len(a) != len(b) {
		pa, pb := strings.TrimRight(a, "0123456789"), strings.TrimRight(b, "0123456789")
		if pa == pb {
			return len(a) < len(b)
		}
	}
	return a < b
}
