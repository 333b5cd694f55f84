package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"

	"trainwire.dev/tools/hashsync/internal/place"
)

// baseline is one algorithm's plan on the same tables, or why it has none.
type baseline struct {
	algo string
	plan *place.Plan
	err  error
}

// report is what place prints.
type report struct {
	plan      *place.Plan
	tables    []place.Table
	baselines []baseline
}

func writePlan(rio *cli.IO, format string, rep report) error {
	if format == "auto" {
		format = "frames"
		if cli.IsTerminal(rio.Stdout) {
			format = "table"
		}
	}
	switch format {
	case "json":
		enc := json.NewEncoder(rio.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep.json())
	case "table":
		return rep.table(rio.Stdout)
	}
	f := rep.plan.Frame(rep.tables)
	for _, b := range rep.baselines {
		f.Meta["baseline."+b.algo] = summaryMap(b)
	}
	w := wire.NewWriter(rio.Stdout, "hashsync/"+cli.Version)
	if err := w.Write(f); err != nil {
		return err
	}
	return w.Close()
}

func summaryMap(b baseline) map[string]any {
	if b.plan == nil {
		return map[string]any{"error": b.err.Error()}
	}
	s := b.plan.Summary()
	m := map[string]any{"max_bytes": s.MaxBytes, "max_load": s.MaxLoad, "mean_bytes": s.MeanBytes, "mean_load": s.MeanLoad, "shards": int64(len(b.plan.Shards))}
	if b.err != nil {
		m["error"] = b.err.Error()
	}
	return m
}

func (rep report) json() map[string]any {
	f := rep.plan.Frame(rep.tables)
	out := map[string]any{"algo": rep.plan.Algo, "shards": f.Items}
	for k, v := range f.Meta {
		out[k] = v
	}
	bs := map[string]any{}
	for _, b := range rep.baselines {
		bs[b.algo] = summaryMap(b)
	}
	if len(bs) > 0 {
		out["baselines"] = bs
	}
	return out
}

func (rep report) table(w io.Writer) error {
	p := rep.plan
	s := p.Summary()
	fmt.Fprintf(w, "placement %s: %d tables, %d shards on %d ranks; max bytes %d (mean %d), max load %.4g (mean %.4g)\n",
		p.Algo, len(rep.tables), len(p.Shards), p.Ranks(), s.MaxBytes, s.MeanBytes, s.MaxLoad, s.MeanLoad)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\trows\tbytes\tload\trank\t")
	for _, sh := range p.Shards {
		fmt.Fprintf(tw, "%s\t[%d, %d)\t%d\t%.4g\t%d\t\n", sh.Table, sh.RowLo, sh.RowHi, sh.Bytes, sh.Load, sh.Rank)
	}
	bytes, load := p.Per()
	fmt.Fprintln(tw, "rank\t\tbytes\tload\tcapacity\t")
	for r := range bytes {
		fmt.Fprintf(tw, "%d\t\t%d\t%.4g\t%d\t\n", r, bytes[r], load[r], p.Capacity[r])
	}
	if len(rep.baselines) > 0 {
		fmt.Fprintln(tw, "algo\tshards\tmax bytes\tmax load\tvalid\t")
		for _, b := range rep.baselines {
			row(tw, b)
		}
	}
	return tw.Flush()
}

func row(w io.Writer, b baseline) {
	if b.plan == nil {
		fmt.Fprintf(w, "%s\t-\t-\t-\t%v\t\n", b.algo, b.err)
		return
	}
	s := b.plan.Summary()
	valid := "yes"
	if b.err != nil {
		valid = b.err.Error()
	}
	fmt.Fprintf(w, "%s\t%d\t%d\t%.4g\t%s\t\n", b.algo, len(b.plan.Shards), s.MaxBytes, s.MaxLoad, valid)
}
