package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/espresso"
)

// planReport is what plan prints.
type planReport struct {
	in   *espresso.Instance
	res  *espresso.Result
	tl   *espresso.Timeline
	desc map[string]string
	algo string
	// cpuMS is the process CPU time the selection took (both goroutines).
	cpuMS float64
}

func ms(ns float64) float64 { return ns / 1e6 }

func (r *planReport) compressed() int {
	n := 0
	for _, o := range r.res.Strategy {
		if r.in.Tree.Paths[o.Path].Comps > 0 {
			n++
		}
	}
	return n
}

func (r *planReport) offloaded() int {
	n := 0
	for _, d := range r.res.Decisions {
		if d.Offloaded {
			n++
		}
	}
	return n
}

// item is one gradient's strategy.
func (r *planReport) item(i int) map[string]any {
	g := r.in.Job.Grads[i]
	o := r.res.Strategy[i]
	gt := r.tl.Grads[i]
	steps := make([]any, len(gt.Steps))
	for k, s := range gt.Steps {
		steps[k] = map[string]any{"step": s.Step, "resource": s.Resource, "start_ns": int64(s.StartNS), "end_ns": int64(s.EndNS)}
	}
	p := r.in.Tree.Paths[o.Path]
	return map[string]any{"index": int64(i), "name": g.Name, "numel": g.Numel, "option": r.in.Tree.Format(o),
		"path": p.String(), "comps": int64(p.Comps), "cpu": o.CPU != 0, "flat": p.Flat,
		"ready_ns": int64(gt.ReadyNS), "start_ns": int64(gt.StartNS), "end_ns": int64(gt.EndNS), "steps": steps}
}

func (r *planReport) summary() map[string]float64 {
	v := map[string]float64{"predicted_ns": r.res.F, "gradients": float64(r.in.N()),
		"compressed": float64(r.compressed()), "offloaded": float64(r.offloaded()),
		"after_gpu_ns": r.res.AfterGPU, "free_compression_ns": r.res.Free, "bp_end_ns": r.tl.BPEndNS,
		"selection_ms": float64(r.res.Wall.Microseconds()) / 1e3, "selection_cpu_ms": r.cpuMS, "evaluations": float64(r.res.Evaluations),
		"pruned": float64(r.res.Pruned), "offload_candidates": float64(r.res.OffloadCandidates),
		"offload_groups": float64(r.res.OffloadGroups), "offload_points": float64(r.res.OffloadPoints)}
	for _, b := range r.res.Baselines {
		v[b.Name+"_ns"] = b.F
		v["speedup_vs_"+b.Name] = b.F / r.res.F
	}
	return v
}

// frames writes a plan frame per gradient (in backprop-ready order) and a
// stats frame with the predicted iteration time against the baselines.
func (r *planReport) frames(w io.Writer) error {
	ww := wire.NewWriter(w, "compressor/"+cli.Version)
	ww.SetMeta(map[string]string{"kind": "compression-plan", "algo": r.algo, "model": r.in.Job.Name})
	for i := range r.in.N() {
		f := &wire.Plan{Kind: "compression", Algo: "espresso", Groups: [][2]int64{{int64(i), int64(i)}},
			Items: []map[string]any{r.item(i)}, PredictedNS: int64(r.res.F),
			Meta: map[string]any{"codec": r.algo}}
		if err := ww.Write(f); err != nil {
			return err
		}
	}
	labels := map[string]string{"codec": r.algo, "model": r.in.Job.Name, "gpu_cost": r.desc["gpu"], "cpu_cost": r.desc["cpu"],
		"cluster":      fmt.Sprintf("%dx%d", r.in.Cluster.Nodes, r.in.Cluster.GPUsPerNode),
		"bootstrapped": fmt.Sprint(r.res.Bootstrapped)}
	for _, b := range r.res.Baselines {
		labels[b.Name] = b.Label
	}
	if err := ww.Write(&wire.Stats{Tool: "compressor", Name: "compressor.plan", Rank: -1, Values: r.summary(), Labels: labels}); err != nil {
		return err
	}
	return ww.Close()
}

func (r *planReport) json() map[string]any {
	items := make([]any, r.in.N())
	for i := range items {
		items[i] = r.item(i)
	}
	var bl []any
	for _, b := range r.res.Baselines {
		bl = append(bl, map[string]any{"name": b.Name, "label": b.Label, "iter_ms": ms(b.F), "speedup": b.F / r.res.F})
	}
	return map[string]any{"model": r.in.Job.Name, "codec": r.algo, "gradients": r.in.N(), "iter_ms": ms(r.res.F),
		"baselines": bl, "costs": r.desc, "summary": r.summary(), "grads": items}
}

func (r *planReport) table(w io.Writer) error {
	cl := r.in.Cluster
	fmt.Fprintf(w, "model %s: %d gradients; codec %s; %d machines x %d GPUs\n", r.in.Job.Name, r.in.N(), r.algo, cl.Nodes, cl.GPUsPerNode)
	fmt.Fprintf(w, "gpu codec: %s\ncpu codec: %s\n", r.desc["gpu"], r.desc["cpu"])
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tgradient\telements\tready ms\tstart ms\tend ms\toption")
	for i, g := range r.in.Job.Grads {
		gt := r.tl.Grads[i]
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.3f\t%.3f\t%.3f\t%s\n", i, g.Name, g.Numel, ms(gt.ReadyNS), ms(gt.StartNS), ms(gt.EndNS),
			r.in.Tree.Format(r.res.Strategy[i]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	r.summaryText(w)
	return nil
}

func (r *planReport) summaryText(w io.Writer) {
	fmt.Fprintf(w, "predicted iteration: %.3f ms (%d of %d gradients compressed, %d on CPUs; backprop ends at %.3f ms)\n",
		ms(r.res.F), r.compressed(), r.in.N(), r.offloaded(), ms(r.tl.BPEndNS+r.in.Job.ForwardNS))
	for _, b := range r.res.Baselines {
		fmt.Fprintf(w, "  vs %-10s %10.3f ms  (%.3fx)  %s\n", b.Name, ms(b.F), b.F/r.res.F, b.Label)
	}
	fmt.Fprintf(w, "  free compression (upper bound of this plan): %.3f ms\n", ms(r.res.Free))
	fmt.Fprintf(w, "search: %.2f ms (%.2f ms of CPU), %d evaluations of F (%d cut early by the lower bound or by dominance); Algorithm 2: %d candidates in %d groups, %d points%s\n",
		float64(r.res.Wall.Microseconds())/1e3, r.cpuMS, r.res.Evaluations, r.res.Pruned, r.res.OffloadCandidates, r.res.OffloadGroups,
		r.res.OffloadPoints, map[bool]string{true: "", false: " (coordinate descent)"}[r.res.OffloadExhaustive || r.res.OffloadGroups == 0])
}

// explain prints why each gradient of at least minElems elements got its
// option.
func (r *planReport) explain(w io.Writer, minElems int64) {
	fmt.Fprintf(w, "explain: %s, codec %s, %d gradients (index = backprop-ready order; Algorithm 1 visits by size, then latest-ready first)\n",
		r.in.Job.Name, r.algo, r.in.N())
	if r.res.Bootstrapped {
		fmt.Fprintf(w, "  Algorithm 1 was run from no compression (%.3f ms) and from the best baseline; the latter's result is kept\n", ms(r.res.Start))
	}
	alt := func(d espresso.Decision) string {
		if math.IsInf(d.RunnerUpF, 1) {
			return "none priced to the end: every alternative was cut"
		}
		return fmt.Sprintf("%s at %.3f ms", r.in.Tree.Format(d.RunnerUp), ms(d.RunnerUpF))
	}
	shown := 0
	for i, g := range r.in.Job.Grads {
		if g.Numel < minElems {
			continue
		}
		shown++
		d := r.res.Decisions[i]
		o := r.res.Strategy[i]
		fmt.Fprintf(w, "#%d %s: %d elements, ready at %.3f ms -> %s\n", i, g.Name, g.Numel, ms(r.tl.Grads[i].ReadyNS), r.in.Tree.Format(o))
		switch {
		case d.Removed:
			fmt.Fprintf(w, "    removed before its visit: uncompressed and communicated before the bubble at gradient #%d (%s);\n"+
				"    compressing it cannot shorten the iteration, only compete with backprop (Property 1)\n", d.Bubble, r.in.Job.Grads[d.Bubble].Name)
		case d.Visited && d.After < d.Before:
			fmt.Fprintf(w, "    visit %d: F %.3f -> %.3f ms over %d alternatives (%d cut early); runner-up: %s\n",
				d.Order+1, ms(d.Before), ms(d.After), d.Alternatives, d.Pruned, alt(d))
		case d.Visited:
			fmt.Fprintf(w, "    visit %d: kept, no option lowers F below %.3f ms (ties keep the current option); best alternative: %s (%d alternatives, %d cut early)\n",
				d.Order+1, ms(d.Before), alt(d), d.Alternatives, d.Pruned)
		}
		if d.Group >= 0 {
			if d.Offloaded {
				fmt.Fprintf(w, "    Algorithm 2: its (size, option) group of %d sends its %d earliest-ready to the CPU (Lemma 1); it is #%d of them\n",
					d.GroupSize, d.Offload, d.Rank+1)
			} else {
				fmt.Fprintf(w, "    Algorithm 2: stays on the GPU (its group of %d offloads %d earliest-ready; it is #%d)\n", d.GroupSize, d.Offload, d.Rank+1)
			}
		}
	}
	if shown == 0 {
		fmt.Fprintf(w, "  no gradient has %d elements or more (--explain-min)\n", minElems)
	}
	r.summaryText(w)
}
