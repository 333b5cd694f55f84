package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"trainwire.dev/lib/cli"
)

// LsCmd is `ckpt ls`.
type LsCmd struct {
	DirFlag
	Format string `help:"table, or json: one JSON manifest per line." enum:"table,json" default:"table" env:"TRAINWIRE_CKPT_FORMAT"`
}

// Run lists the catalog.
func (c *LsCmd) Run(rio *cli.IO) error {
	cat, err := openCatalog(c.Dir)
	if err != nil {
		return err
	}
	all, err := cat.List()
	cat.Close()
	if err != nil {
		return err
	}
	if c.Format == "json" {
		for _, m := range all {
			b, _ := jsonLine(m)
			fmt.Fprintln(rio.Stdout, string(b))
		}
		return nil
	}
	tw := tabwriter.NewWriter(rio.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "iter\tranks\tbytes\tcreated\ttags")
	for _, m := range all {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\n", m.Iter, len(m.Shards), m.Bytes, m.Created.Format(time.RFC3339), strings.Join(m.Tags, ","))
	}
	return tw.Flush()
}

func jsonLine(v any) ([]byte, error) { return json.Marshal(v) }
