package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
	"trainwire.dev/tools/ckpt/internal/health"
)

// HealthCmd is `ckpt health`.
type HealthCmd struct {
	launch.Flags `embed:""`
	Etcd         []string      `required:"" help:"etcd endpoints (as given to the agents)." env:"TRAINWIRE_CKPT_ETCD"`
	Format       string        `help:"table, or json: one JSON object per line (the root, each member, each decision)." enum:"table,json" default:"table" env:"TRAINWIRE_CKPT_FORMAT"`
	Timeout      time.Duration `help:"Deadline for etcd." default:"10s" env:"TRAINWIRE_TIMEOUT"`
}

// Run prints the root, the members whose heartbeat is alive, and the
// recovery decisions the root published.
func (c *HealthCmd) Run(rio *cli.IO) error {
	env, err := c.Flags.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	run := env.RunID
	if run == "" {
		run = "default"
	}
	cl, err := health.NewClient(c.Etcd)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(rio.Ctx, c.Timeout)
	defer cancel()
	members, err := health.Members(ctx, cl, run)
	if err != nil {
		return fmt.Errorf("etcd %s: %w", strings.Join(c.Etcd, ","), err)
	}
	ds, err := health.Decisions(ctx, cl, run)
	if err != nil {
		return err
	}
	root := health.Leader(ctx, cl, run)
	if c.Format == "json" {
		enc := json.NewEncoder(rio.Stdout)
		_ = enc.Encode(map[string]any{"root": root, "run": run})
		for _, m := range members {
			_ = enc.Encode(map[string]any{"member": m})
		}
		for _, d := range ds {
			_ = enc.Encode(map[string]any{"decision": d})
		}
		return nil
	}
	fmt.Fprintf(rio.Stdout, "run %s: root agent rank %d; %d agents alive\n", run, root, len(members))
	for _, m := range members {
		fmt.Fprintf(rio.Stdout, "  rank %d  machine %s  pid %d  since %s\n", m.Rank, m.Machine, m.PID, time.Unix(0, m.Since).UTC().Format(time.RFC3339))
	}
	for _, d := range ds {
		fmt.Fprintf(rio.Stdout, "decision %d by root %d at %s: %s %v (%.0f ms after the heartbeat expired): %s\n", d.Seq, d.Root,
			time.Unix(0, d.DecidedAt).UTC().Format(time.RFC3339), d.Kind, d.Ranks, d.DetectedMS, d.Action)
	}
	return nil
}
