package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/fuser/internal/fusion"
)

// OutputFlags choose the output format.
type OutputFlags struct {
	Format string `help:"Output: frames (a trainwire plan stream, for tools), json or table (for people); auto is table on a terminal, frames otherwise." enum:"auto,frames,json,table" default:"auto" env:"TRAINWIRE_FORMAT"`
}

// format is the output format: auto is cli.ResolveFormat's.
func (o *OutputFlags) format(w io.Writer) string { return cli.ResolveFormat(o.Format, w) }

// report is what plan and eval print.
type report struct {
	model     *wire.Model
	p         *fusion.Problem
	r         fusion.Result
	baselines []fusion.Baseline
	costs     map[string]string
}

const producer = "fuser/"

func (o *OutputFlags) write(rio *cli.IO, rep report) error {
	switch o.format(rio.Stdout) {
	case "json":
		enc := json.NewEncoder(rio.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep.json())
	case "table":
		return rep.table(rio.Stdout)
	}
	w := wire.NewWriter(rio.Stdout, producer+cli.Version)
	if err := w.Write(rep.frame()); err != nil {
		return err
	}
	return w.Close()
}

// fail reports err in-band (an error frame) when the output is frames,
// in a stream with no end frame: a failed run's stream is never complete.
func (o *OutputFlags) fail(rio *cli.IO, err error) {
	if o.format(rio.Stdout) != "frames" {
		return
	}
	_ = cli.EndStream(wire.NewWriter(rio.Stdout, producer+cli.Version), err)
}

func ms(ns float64) float64 { return ns / 1e6 }

func (rep report) names(g fusion.Group) []string {
	out := make([]string, 0, g.Last-g.First+1)
	for i := g.First; i <= g.Last; i++ {
		out = append(out, rep.model.Grads[i].Name)
	}
	return out
}

func ranges(groups []fusion.Group) [][2]int64 {
	out := make([][2]int64, len(groups))
	for i, g := range groups {
		out[i] = [2]int64{int64(g.First), int64(g.Last)}
	}
	return out
}

// frame is the plan as a wire frame: groups as index ranges, one item per
// group with its tensors and timeline, baselines and search statistics in
// meta.
func (rep report) frame() *wire.Plan {
	items := make([]map[string]any, len(rep.r.Steps))
	for i, s := range rep.r.Steps {
		names := make([]any, 0)
		for _, n := range rep.names(s.Group) {
			names = append(names, n)
		}
		items[i] = map[string]any{"bytes": int64(s.Bytes), "names": names, "bp_end_ns": int64(s.BPEnd),
			"comp_end_ns": int64(s.CompEnd), "comm_start_ns": int64(s.CommStart), "comm_end_ns": int64(s.CommEnd)}
	}
	var bl []any
	for _, b := range rep.baselines {
		bl = append(bl, map[string]any{"name": b.Name, "param": b.Param, "label": b.Label(), "predicted_ns": int64(b.Time),
			"groups": int64(len(b.Groups))})
	}
	meta := map[string]any{"model": rep.model.Name, "gradients": int64(rep.p.N()), "comm_cost": rep.costs["comm"],
		"comp_cost": rep.costs["comp"], "nodes": rep.r.Stats.Nodes, "prune1": rep.r.Stats.Prune1,
		"prune2": rep.r.Stats.Prune2, "max_frontier": int64(rep.r.Stats.MaxFrontier)}
	if bl != nil {
		meta["baselines"] = bl
	}
	return &wire.Plan{Kind: "fusion", Algo: rep.r.Algo, Groups: ranges(rep.r.Groups), Items: items,
		PredictedNS: int64(rep.r.Time), ProvenOptimal: rep.r.ProvenOptimal, Meta: meta}
}

type jsonGroup struct {
	First       int      `json:"first"`
	Last        int      `json:"last"`
	Bytes       int64    `json:"bytes"`
	Names       []string `json:"names"`
	BPEndMS     float64  `json:"bp_end_ms"`
	CompEndMS   float64  `json:"comp_end_ms"`
	CommStartMS float64  `json:"comm_start_ms"`
	CommEndMS   float64  `json:"comm_end_ms"`
}

type jsonBaseline struct {
	Name   string     `json:"name"`
	Label  string     `json:"label"`
	Param  float64    `json:"param"`
	IterMS float64    `json:"iter_ms"`
	Groups [][2]int64 `json:"groups"`
}

type jsonReport struct {
	Model         string            `json:"model"`
	Gradients     int               `json:"gradients"`
	Algo          string            `json:"algo"`
	ProvenOptimal bool              `json:"proven_optimal"`
	IterMS        float64           `json:"iter_ms"`
	Groups        []jsonGroup       `json:"groups"`
	Baselines     []jsonBaseline    `json:"baselines,omitempty"`
	Costs         map[string]string `json:"costs"`
	Stats         map[string]any    `json:"stats"`
}

func (rep report) json() jsonReport {
	j := jsonReport{Model: rep.model.Name, Gradients: rep.p.N(), Algo: rep.r.Algo, ProvenOptimal: rep.r.ProvenOptimal,
		IterMS: ms(rep.r.Time), Costs: rep.costs,
		Stats: map[string]any{"nodes": rep.r.Stats.Nodes, "prune1": rep.r.Stats.Prune1, "prune2": rep.r.Stats.Prune2,
			"max_frontier": rep.r.Stats.MaxFrontier}}
	for _, s := range rep.r.Steps {
		j.Groups = append(j.Groups, jsonGroup{First: s.First, Last: s.Last, Bytes: int64(s.Bytes), Names: rep.names(s.Group),
			BPEndMS: ms(s.BPEnd), CompEndMS: ms(s.CompEnd), CommStartMS: ms(s.CommStart), CommEndMS: ms(s.CommEnd)})
	}
	for _, b := range rep.baselines {
		j.Baselines = append(j.Baselines, jsonBaseline{Name: b.Name, Label: b.Label(), Param: b.Param, IterMS: ms(b.Time), Groups: ranges(b.Groups)})
	}
	return j
}

func (rep report) table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "model %s: %d gradients; algo %s; proven optimal %v; predicted iteration %.3f ms\n",
		rep.model.Name, rep.p.N(), rep.r.Algo, rep.r.ProvenOptimal, ms(rep.r.Time))
	fmt.Fprintf(w, "comm cost: %s\ncomp cost: %s\n", rep.costs["comm"], rep.costs["comp"])
	fmt.Fprintln(tw, "group\ttensors\tMB\tbp end ms\tcomp end ms\tcomm start ms\tcomm end ms\t")
	for a, s := range rep.r.Steps {
		fmt.Fprintf(tw, "%d\t%d-%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", a, s.First, s.Last, s.Bytes/1e6,
			ms(s.BPEnd), ms(s.CompEnd), ms(s.CommStart), ms(s.CommEnd))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(rep.baselines) > 0 {
		fmt.Fprintln(w, "baselines:")
		fmt.Fprintln(tw, "plan\tgroups\titeration ms\tvs optimal\t")
		for _, b := range rep.baselines {
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3fx\t\n", b.Label(), len(b.Groups), ms(b.Time), b.Time/rep.r.Time)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(w, "search: %d nodes, prune1 %d, prune2 %d\n", rep.r.Stats.Nodes, rep.r.Stats.Prune1, rep.r.Stats.Prune2)
	return err
}

// parseGroups parses "0-3,4-4" or "0-3,4".
func parseGroups(s string) ([]fusion.Group, error) {
	var out []fusion.Group
	for _, part := range strings.Split(s, ",") {
		a, b, found := strings.Cut(strings.TrimSpace(part), "-")
		first, err1 := strconv.Atoi(a)
		last, err2 := first, error(nil)
		if found {
			last, err2 = strconv.Atoi(b)
		}
		if err1 != nil || err2 != nil {
			return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--groups: bad range %q (want FIRST-LAST)", part))
		}
		out = append(out, fusion.Group{First: first, Last: last})
	}
	return out, nil
}

// readPlan reads the first plan frame of a stream.
func readPlan(path string, lim wire.Limits) ([]fusion.Group, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := wire.NewReader(f, lim)
	for {
		fr, err := r.Next()
		if err == io.EOF {
			return nil, exit.BadInputf("%s: no plan frame", path)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if p, ok := fr.(*wire.Plan); ok {
			out := make([]fusion.Group, len(p.Groups))
			for i, g := range p.Groups {
				out[i] = fusion.Group{First: int(g[0]), Last: int(g[1])}
			}
			return out, nil
		}
	}
}
