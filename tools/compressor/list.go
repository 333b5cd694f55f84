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

// ListCmd prints every algorithm.
type ListCmd struct {
	Format string `help:"table or json (one object per algorithm per line)." enum:"table,json" default:"table"`
}

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
	return tw.Flush()
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
