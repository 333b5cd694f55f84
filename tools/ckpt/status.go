package main

import (
	"fmt"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
)

// StatusCmd is `ckpt status`.
type StatusCmd struct {
	AgentFlags
	Format  string        `help:"Output: table or json." enum:"table,json" default:"table"`
	Timeout time.Duration `help:"Deadline for the agent's answer." default:"30s" env:"TRAINWIRE_TIMEOUT"`
}

// Run prints the agent's committed iteration, versions and counters.
func (c *StatusCmd) Run(rio *cli.IO) error {
	_, socket, err := c.resolve()
	if err != nil {
		return err
	}
	cl, err := agent.Dial(socket, c.Timeout, wire.DefaultLimits)
	if err != nil {
		return err
	}
	defer cl.Close()
	meta, frames, err := cl.Status()
	if err != nil {
		return err
	}
	type ver struct {
		Owner  int64  `json:"owner"`
		Iter   int64  `json:"iter"`
		Len    int64  `json:"len"`
		State  string `json:"state"`
		Format string `json:"format"`
		XXH3   string `json:"xxh3"`
	}
	var vs []ver
	var counters map[string]float64
	for _, f := range frames {
		if s, ok := f.(*wire.Stats); ok {
			if s.Name == "version" {
				vs = append(vs, ver{s.Rank, s.Step, int64(s.Values["len"]), s.Labels["state"], s.Labels["format"], s.Labels["xxh3"]})
			} else if s.Name == "counters" {
				counters = s.Values
			}
		}
	}
	if c.Format == "json" {
		return writeJSON(rio.Stdout, map[string]any{"agent": meta, "versions": vs, "counters": counters})
	}
	fmt.Fprintf(rio.Stdout, "rank %s of %s, m=%s (%s, sends to %s), committed iteration %s, holding %s of %s bytes\n",
		meta["rank"], meta["world"], meta["m"], meta["strategy"], meta["sends_to"], meta["committed"], meta["used"], meta["memory"])
	for _, v := range vs {
		fmt.Fprintf(rio.Stdout, "  rank %d  iter %d  %d bytes  %s  %s  xxh3 %s\n", v.Owner, v.Iter, v.Len, v.Format, v.State, v.XXH3)
	}
	if counters != nil {
		fmt.Fprintf(rio.Stdout, "  sent %.0f bytes in %.0f chunks, received %.0f in %.0f; CRC failures %.0f; replications ok %.0f, failed %.0f\n",
			counters["bytes_sent"], counters["chunks_sent"], counters["bytes_received"], counters["chunks_received"], counters["crc_failures"], counters["replications_ok"], counters["replications_failed"])
	}
	return nil
}
