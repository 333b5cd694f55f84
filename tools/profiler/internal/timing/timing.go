// Package timing builds the per-iteration timing model the planners (fuser,
// compressor plan) read: gradients in backprop order with sizes and ready
// times, forward and per-gradient backward compute, communication samples
// with a fitted α-β line, averaged over iterations and ranks with the
// normalized spread. It builds one from traces or from a built-in model.
package timing

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"

	"trainwire.dev/lib/costmodel"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/profiler/internal/analysis"
	"trainwire.dev/tools/profiler/internal/builtin"
	"trainwire.dev/tools/profiler/internal/trace"
)

// Options tune model building.
type Options struct {
	Name string
	// Rank picks one rank (-1: every rank's iterations are samples).
	Rank int64
	// Params name and size the gradients in registration order (backprop
	// order is the reverse) when the trace does not carry sizes.
	Params []analysis.MetaParam
	// SkipFirst drops the first N iterations (warm-up).
	SkipFirst int
}

// iter is one iteration's measurements.
type iter struct {
	total, fwd, bwd int64
	ready           []int64 // ns after backward start, backprop order
	numel           []int64
	names           []string
	comm            []wire.CommSample
}

// FromTraces builds a model from loaded ranks.
func FromTraces(ranks []*analysis.Rank, o Options) (*wire.Model, error) {
	c, err := collect(ranks, o)
	if err != nil {
		return nil, err
	}
	keep, best := commonIters(c.its)
	if best == 0 {
		return nil, errors.New("no gradients found in any iteration")
	}
	m := &wire.Model{Name: o.Name, World: c.world, Iters: int64(len(keep))}
	if m.Name == "" {
		m.Name = "trace"
	}
	var iterNS, fwd, bwd []float64
	for _, it := range keep {
		iterNS = append(iterNS, float64(it.total))
		fwd = append(fwd, float64(it.fwd))
		bwd = append(bwd, float64(it.bwd))
	}
	m.IterNS, m.ForwardNS, m.BackwardNS = int64(mean(iterNS)), int64(mean(fwd)), int64(mean(bwd))
	grads, readySpread := averageGrads(keep, best)
	m.Grads = grads
	if err := applyParams(m.Grads, c.params); err != nil {
		return nil, err
	}
	for i := range m.Grads {
		g := &m.Grads[i]
		if g.Name == "" {
			g.Name = fmt.Sprintf("grad_%d", i)
		}
		if g.Numel > 0 {
			g.Bytes = g.Numel * elemSize(g.DType)
		}
	}
	for _, it := range keep {
		m.Comm = append(m.Comm, it.comm...)
	}
	m.Meta = map[string]any{
		"source":        "trace",
		"format":        c.format,
		"ranks":         c.used,
		"iterations":    int64(len(keep)),
		"iters_dropped": int64(len(c.its) - len(keep)),
		"iter_spread":   round4(cv(iterNS)),
		"ready_spread":  readySpread,
	}
	missing := 0
	for _, g := range m.Grads {
		if g.Bytes <= 0 {
			missing++
		}
	}
	if missing > 0 {
		m.Meta["grads_without_size"] = int64(missing)
	}
	fitComm(m)
	return m, nil
}

// collected is what FromTraces reads from the ranks it uses: their
// iterations (warm-up dropped), ranks, world, trace format and the
// parameter list (from the options or a rank's metadata).
type collected struct {
	its    []iter
	used   []int64
	world  int64
	format string
	params []analysis.MetaParam
}

// collect reads the iterations of every rank o selects, by the trace's
// format.
func collect(ranks []*analysis.Rank, o Options) (*collected, error) {
	c := &collected{params: o.Params}
	for _, r := range ranks {
		if o.Rank >= 0 && r.Rank != o.Rank {
			continue
		}
		c.used = append(c.used, r.Rank)
		c.world = max(c.world, r.World)
		c.format = string(r.Format)
		if c.params == nil && r.Meta != nil {
			c.params = r.Meta.Params
		}
		var ri []iter
		switch r.Format {
		case trace.Horovod:
			ri = horovodIters(r)
		case trace.BytePS:
			ri = bytepsIters(r)
		default:
			ri = torchIters(r)
		}
		if o.SkipFirst > 0 && len(ri) > o.SkipFirst {
			ri = ri[o.SkipFirst:]
		}
		c.its = append(c.its, ri...)
	}
	if len(c.used) == 0 {
		return nil, fmt.Errorf("no rank %d in the traces", o.Rank)
	}
	if len(c.its) == 0 {
		return nil, errors.New("no iteration with gradients found (the trace needs AccumulateGrad events, Horovod negotiations or BytePS tensor-ready events)")
	}
	return c, nil
}

// commonIters keeps the iterations with the most common gradient count
// (the larger count on a tie) and returns that count.
func commonIters(its []iter) ([]iter, int) {
	cnt := map[int]int{}
	for _, it := range its {
		cnt[len(it.ready)]++
	}
	best, bestN := 0, -1
	for k, n := range cnt {
		if n > bestN || (n == bestN && k > best) {
			best, bestN = k, n
		}
	}
	var keep []iter
	for _, it := range its {
		if len(it.ready) == best {
			keep = append(keep, it)
		}
	}
	return keep, best
}

// averageGrads is the n gradients averaged over the iterations: ready
// time (mean), compute since the previous gradient, size and name (from
// any iteration that has them); and the mean coefficient of variation of
// the ready times (the ready spread).
func averageGrads(keep []iter, n int) ([]wire.Grad, float64) {
	var grads []wire.Grad
	var spreadSum float64
	var spreadN int
	prev := 0.0
	for g := 0; g < n; g++ {
		var ready []float64
		numel := int64(-1)
		name := ""
		for _, it := range keep {
			ready = append(ready, float64(it.ready[g]))
			if it.numel[g] > 0 {
				numel = it.numel[g]
			}
			if it.names[g] != "" {
				name = it.names[g]
			}
		}
		mr := mean(ready)
		if mr > 0 && len(ready) > 1 {
			spreadSum += std(ready) / mr
			spreadN++
		}
		gr := wire.Grad{Name: name, Numel: numel, DType: wire.F32, ReadyNS: int64(math.Round(mr))}
		gr.ComputeNS = max(0, int64(math.Round(mr-prev)))
		prev = math.Max(prev, mr)
		grads = append(grads, gr)
	}
	if spreadN == 0 {
		return grads, 0.0
	}
	return grads, round4(spreadSum / float64(spreadN))
}

// applyParams takes sizes, names and types from the parameter list
// (registration order, so reversed into backprop order) where the trace
// has none.
func applyParams(grads []wire.Grad, params []analysis.MetaParam) error {
	if len(params) == 0 {
		return nil
	}
	if len(params) != len(grads) {
		return fmt.Errorf("%d parameters given, the trace has %d gradients per iteration", len(params), len(grads))
	}
	for i := range grads {
		p := params[len(params)-1-i]
		if grads[i].Name == "" || strings.HasPrefix(grads[i].Name, "grad_") {
			grads[i].Name = p.Name
		}
		if grads[i].Numel <= 0 {
			grads[i].Numel = p.Numel
		}
		if p.DType != "" {
			grads[i].DType = wire.DType(p.DType)
		}
	}
	return nil
}

func elemSize(d wire.DType) int64 {
	if s := d.Size(); s > 0 {
		return int64(s)
	}
	return 4
}

// fitComm fits t = α + β·bytes to the samples (least squares, lib/costmodel).
func fitComm(m *wire.Model) {
	var s []costmodel.Sample
	for _, c := range m.Comm {
		if c.Bytes > 0 && c.NS > 0 {
			s = append(s, costmodel.Sample{X: float64(c.Bytes), T: float64(c.NS)})
		}
	}
	if len(s) == 0 {
		return
	}
	l, rmse, err := costmodel.FitLinear(s)
	if err != nil {
		m.Meta["comm_fit"] = "none: " + err.Error()
		return
	}
	m.Meta["comm_alpha_ns"] = round4(l.Alpha)
	m.Meta["comm_beta_ns_per_byte"] = l.Beta
	m.Meta["comm_fit_rmse_ns"] = round4(rmse)
	m.Meta["comm_samples"] = int64(len(s))
}

func mean(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(len(x))
}

func std(x []float64) float64 {
	m := mean(x)
	var s float64
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return math.Sqrt(s / float64(len(x)))
}

func cv(x []float64) float64 {
	if m := mean(x); m > 0 {
		return std(x) / m
	}
	return 0
}

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

const (
	accEval  = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
	accPlain = "torch::autograd::AccumulateGrad"
)

// torchIters reads PyTorch iterations: ProfilerStep spans, forward from
// "## forward ##" / DDP forward, backward from the first autograd
// function, a gradient ready at the end of each AccumulateGrad.
func torchIters(r *analysis.Rank) []iter {
	steps := r.Steps
	if len(steps) == 0 && len(r.Spans) > 0 {
		// one iteration over the whole trace
		lo, hi := r.Spans[0].TS, r.Spans[0].End
		for i := range r.Spans {
			lo, hi = min(lo, r.Spans[i].TS), max(hi, r.Spans[i].End)
		}
		steps = []analysis.Span{{TS: lo, End: hi}}
	}
	acc := accPlain
	for i := range r.Spans {
		if r.Spans[i].Name == accEval {
			acc = accEval
			break
		}
	}
	gpu := r.HasGPU()
	out := make([]iter, len(steps))
	bwdStart := make([]int64, len(steps))
	fwdAnno := make([]int64, len(steps))
	for k := range steps {
		bwdStart[k], fwdAnno[k] = -1, -1
	}
	stepOf := func(ts int64) int {
		i := sort.Search(len(steps), func(i int) bool { return steps[i].End > ts })
		if i < len(steps) && steps[i].TS <= ts {
			return i
		}
		return -1
	}
	for i := range r.Spans {
		s := &r.Spans[i]
		if s.GPU {
			continue
		}
		k := stepOf(s.TS)
		if k < 0 {
			continue
		}
		switch {
		case s.Name == "## forward ##" || s.Name == "DistributedDataParallel.forward":
			if fwdAnno[k] < 0 {
				fwdAnno[k] = s.Dur()
			}
		case s.Name == "## backward ##" || strings.HasPrefix(s.Name, "autograd::engine::evaluate_function"):
			if bwdStart[k] < 0 || s.TS < bwdStart[k] {
				bwdStart[k] = s.TS
			}
		}
	}
	for i := range r.Spans {
		s := &r.Spans[i]
		if s.GPU {
			continue
		}
		k := stepOf(s.TS)
		if k < 0 || bwdStart[k] < 0 {
			continue
		}
		it := &out[k]
		switch {
		case s.Name == acc:
			it.ready = append(it.ready, s.End-bwdStart[k])
			it.numel = append(it.numel, s.Numel)
			it.names = append(it.names, "")
			it.bwd = max(it.bwd, s.End-bwdStart[k])
		}
	}
	for _, ci := range r.Collectives() {
		s := &r.Spans[ci]
		if gpu && !s.GPU {
			continue
		}
		k := stepOf(s.TS)
		if k < 0 {
			continue
		}
		out[k].comm = append(out[k].comm, wire.CommSample{Op: analysis.OpName(s), Bytes: max(s.Bytes, 0), NS: s.Dur(), World: r.World})
	}
	var res []iter
	for k := range out {
		if bwdStart[k] < 0 || len(out[k].ready) == 0 {
			continue
		}
		it := out[k]
		it.total = steps[k].Dur()
		it.fwd = fwdAnno[k]
		if it.fwd < 0 {
			it.fwd = bwdStart[k] - steps[k].TS
		}
		res = append(res, it)
	}
	return res
}

// horovodIters: each tensor's k-th negotiation is iteration k; a tensor is
// ready when its negotiation begins (the first rank reported it).
func horovodIters(r *analysis.Rank) []iter {
	type occ struct {
		ts, bytes int64
		comm      *analysis.Span
	}
	byTensor := map[string][]occ{}
	var order []string
	for i := range r.Spans {
		s := &r.Spans[i]
		if s.Tensor == "" {
			continue
		}
		if strings.HasPrefix(s.Name, "NEGOTIATE_") {
			if _, ok := byTensor[s.Tensor]; !ok {
				order = append(order, s.Tensor)
			}
			byTensor[s.Tensor] = append(byTensor[s.Tensor], occ{ts: s.TS, bytes: s.Bytes})
		}
	}
	for i := range r.Spans {
		s := &r.Spans[i]
		if s.Tensor != "" && analysis.IsCollective(s, r.Format) {
			l := byTensor[s.Tensor]
			for j := range l {
				if l[j].comm == nil && l[j].ts <= s.TS {
					if j+1 < len(l) && l[j+1].ts <= s.TS {
						continue
					}
					l[j].comm = s
					break
				}
			}
		}
	}
	return occIters(order, func(t string) int { return len(byTensor[t]) }, func(t string, k int) (int64, int64, *analysis.Span) {
		o := byTensor[t][k]
		return o.ts, o.bytes, o.comm
	}, r)
}

// bytepsIters: tensor-ready events (Espresso's tensor_ready.json) when
// present, else the start of each gradient's "total" sync span.
func bytepsIters(r *analysis.Rank) []iter {
	type occ struct{ ts int64 }
	byTensor := map[string][]occ{}
	var order []string
	add := func(name string, ts int64) {
		if _, ok := byTensor[name]; !ok {
			order = append(order, name)
		}
		byTensor[name] = append(byTensor[name], occ{ts})
	}
	if len(r.Ready) > 0 {
		for _, rd := range r.Ready {
			add(rd.Name, rd.TS)
		}
	} else {
		for i := range r.Spans {
			s := &r.Spans[i]
			if analysis.IsCollective(s, r.Format) {
				add(s.Name, s.TS)
			}
		}
	}
	return occIters(order, func(t string) int { return len(byTensor[t]) }, func(t string, k int) (int64, int64, *analysis.Span) {
		return byTensor[t][k].ts, -1, nil
	}, r)
}

// occIters turns per-tensor occurrences into iterations: the k-th
// occurrence of every tensor is iteration k, ordered by ready time.
func occIters(order []string, count func(string) int, at func(string, int) (int64, int64, *analysis.Span), r *analysis.Rank) []iter {
	n := math.MaxInt
	for _, t := range order {
		n = min(n, count(t))
	}
	if len(order) == 0 || n == 0 {
		return nil
	}
	var out []iter
	for k := 0; k < n; k++ {
		type g struct {
			name  string
			ts    int64
			bytes int64
			comm  *analysis.Span
		}
		var gs []g
		for _, t := range order {
			ts, b, c := at(t, k)
			gs = append(gs, g{t, ts, b, c})
		}
		sort.SliceStable(gs, func(i, j int) bool { return gs[i].ts < gs[j].ts })
		it := iter{}
		start := gs[0].ts
		end := start
		for _, x := range gs {
			it.ready = append(it.ready, x.ts-start)
			numel := int64(-1)
			if x.bytes > 0 {
				numel = x.bytes / 4
			}
			it.numel = append(it.numel, numel)
			it.names = append(it.names, x.name)
			if x.comm != nil {
				end = max(end, x.comm.End)
				it.comm = append(it.comm, wire.CommSample{Op: analysis.OpName(x.comm), Bytes: max(x.comm.Bytes, 0), NS: x.comm.Dur(), World: r.World})
			}
		}
		it.bwd = gs[len(gs)-1].ts - start
		it.total = max(end, gs[len(gs)-1].ts) - start
		out = append(out, it)
	}
	return out
}

// BuiltinOptions describe the hardware a built-in model runs on.
type BuiltinOptions struct {
	Batch int64
	// TFLOPS is the sustained device throughput (forward and backward).
	TFLOPS float64
	World  int64
	// DType of the gradients.
	DType wire.DType
}

// FromBuiltin builds a model from the library: gradients in backprop
// order (reverse registration) with their real sizes, the backward
// compute of each (2× its layer's forward FLOPs) and a ready time that
// accumulates it.
func FromBuiltin(name string, o BuiltinOptions) (*wire.Model, error) {
	b, err := builtin.Get(name)
	if err != nil {
		return nil, err
	}
	if o.Batch <= 0 || o.TFLOPS <= 0 {
		return nil, fmt.Errorf("batch (%d) and tflops (%g) must be positive", o.Batch, o.TFLOPS)
	}
	if o.DType == "" {
		o.DType = wire.F32
	}
	ns := func(flops float64) int64 {
		return int64(math.Round(flops * float64(o.Batch) / (o.TFLOPS * 1e12) * 1e9))
	}
	m := &wire.Model{Name: b.Name, World: o.World, Iters: 1}
	m.ForwardNS = ns(b.FwdFLOPs())
	var ready int64
	for i := len(b.Params) - 1; i >= 0; i-- {
		p := b.Params[i]
		c := ns(2 * p.FwdFLOPs)
		ready += c
		m.Grads = append(m.Grads, wire.Grad{Name: p.Name, Numel: p.Numel(), Bytes: p.Numel() * elemSize(o.DType),
			DType: o.DType, ReadyNS: ready, ComputeNS: c})
	}
	m.BackwardNS = ready
	m.IterNS = m.ForwardNS + m.BackwardNS
	m.Meta = map[string]any{"source": "builtin", "input": b.Input, "batch": o.Batch, "tflops": o.TFLOPS,
		"params": b.Numel(), "fwd_gflops_per_sample": round4(b.FwdFLOPs() / 1e9)}
	return m, nil
}
