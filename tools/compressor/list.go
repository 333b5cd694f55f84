package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
)

// ListCmd prints every algorithm (and, in the table, every memory).
type ListCmd struct {
	Format string `help:"table or json (one object per algorithm per line)." enum:"table,json" default:"table"`
}

// memoryFlags maps the memories' option names to encode's flags.
var memoryFlags = map[string]string{"beta": "--beta", "gamma": "--gamma", "momentum": "--dgc-momentum",
	"lr": "--lr", "rescale_lr": "--ef-lr", "clip_norm": "--dgc-clip"}

// Run prints the algorithms on stdout.
func (c *ListCmd) Run(rio *cli.IO) error {
	infos := codec.Infos()
	if c.Format == "json" {
		enc := json.NewEncoder(rio.Stdout)
		enc.SetEscapeHTML(false)
		for _, in := range infos {
			if err := enc.Encode(map[string]any{"algo": in.Algo, "kind": in.Kind, "params": in.Params,
				"size": in.SizeFormula, "summable": in.Summable, "doc": in.Doc}); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(rio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ALGO\tKIND\tPARAMS (defaults)\tBYTES OUT (d elements)\tSUMMABLE")
	for _, in := range infos {
		var ps []string
		for _, k := range slices.Sorted(mapsKeys(in.Params)) {
			ps = append(ps, k+"="+in.Params[k])
		}
		p := strings.Join(ps, " ")
		if p == "" {
			p = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Algo, in.Kind, p, in.SizeFormula, in.Summable)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(rio.Stdout)
	tw = tabwriter.NewWriter(rio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMORY (--memory)\tFLAGS (defaults)\tUPDATE")
	for _, m := range codec.MemoryInfos() {
		var ps []string
		for _, k := range slices.Sorted(mapsKeys(m.Params)) {
			ps = append(ps, memoryFlags[k]+"="+m.Params[k])
		}
		p := strings.Join(ps, " ")
		if p == "" {
			p = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", m.Name, p, m.Doc)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(rio.Stdout, "\nEvery memory keeps its state per tensor name, or per tensor and compression point with --point NAME.")
	fmt.Fprintln(rio.Stdout, "sum --average divides the sums by the number of frames (randomk, fp16, bf16, powersgd, sparse sums).")
	return nil
}

func mapsKeys(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
