package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/tools/straggle/internal/inject"
	"trainwire.dev/tools/straggle/internal/sim"
)

// SimCmd is the what-if simulator of seed-straggle.md §5.5.
type SimCmd struct {
	Table     string        `help:"Reproduce a reference table of the spec: all, wait, a, a-cost, b1, b2, b3, b4, b5 or conv. Exit 1 if a cell is out of tolerance." enum:",all,wait,a,a-cost,b1,b2,b3,b4,b5,conv" default:""`
	Mode      string        `help:"Policy to simulate when no --table: rna (q probes), bsp or solo." enum:"rna,bsp,solo" default:"rna"`
	Model     string        `help:"a: fresh-start rounds (Model A, U(--lo,--hi) per node per round); b: continuous non-blocking workers (Model B, iteration times from the injection flags)." enum:"a,b" default:"b"`
	World     int           `help:"Number of workers." default:"4"`
	Probes    int           `help:"Probes per round (q): 1 is the random initiator, 2 is RNA." default:"2"`
	Rounds    int           `help:"Rounds to simulate." default:"3000"`
	Comm      time.Duration `help:"Allreduce time C per round (Model B)." default:"5ms"`
	Lo        time.Duration `help:"Model A: lowest per-node time." default:"10ms"`
	Hi        time.Duration `help:"Model A: highest per-node time." default:"50ms"`
	ProbeCost time.Duration `help:"Model A: cost per probe." default:"0s"`
	Seed      uint64        `help:"Random seed: the same seed replays the same run." default:"1" env:"TRAINWIRE_STRAGGLE_SEED"`
	Format    string        `help:"Output: table or json (one object per line)." enum:"table,json" default:"table"`

	Inject inject.Flags `embed:"" prefix:""`
}

// Run runs the simulator.
func (c *SimCmd) Run(rio *cli.IO) error {
	if c.Table != "" {
		return c.tables(rio)
	}
	if c.World < 1 || c.Probes < 1 || c.Rounds < 1 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("sim: --world, --probes and --rounds must be at least 1"))
	}
	mode := sim.Mode(c.Mode)
	if c.Model == "a" {
		rs := sim.ModelA(mode, c.World, c.Probes, msf(c.Lo), msf(c.Hi), msf(c.ProbeCost), c.Rounds, 1, c.Seed)
		s := sim.Summarize(rs)
		if c.Format == "json" {
			return json.NewEncoder(rio.Stdout).Encode(map[string]any{"model": "a", "mode": c.Mode, "world": c.World, "probes": c.Probes, "p5_ms": s.P5, "p25_ms": s.P25, "p50_ms": s.P50, "p75_ms": s.P75, "p95_ms": s.P95, "mean_ms": s.Mean})
		}
		fmt.Fprintf(rio.Stdout, "model A, %s, N=%d, q=%d: round p5 %.2f p25 %.2f p50 %.2f p75 %.2f p95 %.2f mean %.2f ms\n", c.Mode, c.World, c.Probes, s.P5, s.P25, s.P50, s.P75, s.P95, s.Mean)
		return nil
	}
	m, err := c.Inject.Model()
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("sim: %w", err))
	}
	dur := func(i int, rng *rand.Rand) float64 { return m.Draw(i, rng) }
	r := sim.ModelB(mode, c.World, c.Probes, c.Rounds, msf(c.Comm), dur, c.Seed)
	if c.Format == "json" {
		return json.NewEncoder(rio.Stdout).Encode(map[string]any{"model": "b", "mode": c.Mode, "world": c.World, "probes": c.Probes,
			"round_ms_mean": r.Round, "round_ms_p50": r.P50, "round_ms_p95": r.P95, "contributors": r.Contrib, "grads_per_s": r.Thr, "max_gap": r.MaxGap, "share": r.Share})
	}
	fmt.Fprintf(rio.Stdout, "model B, %s, N=%d, q=%d, C=%v: round mean %.2f p50 %.2f p95 %.2f ms; Σw/round %.2f; grads/s %.1f; max gap %d; share by worker %.3f\n",
		c.Mode, c.World, c.Probes, c.Comm, r.Round, r.P50, r.P95, r.Contrib, r.Thr, r.MaxGap, r.Share)
	return nil
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (c *SimCmd) tables(rio *cli.IO) error {
	tabs := []string{c.Table}
	if c.Table == "all" {
		tabs = sim.Tables
	}
	bad := 0
	enc := json.NewEncoder(rio.Stdout)
	for _, t := range tabs {
		checks, err := sim.Reproduce(t, c.Seed)
		if err != nil {
			return cli.WithCode(cli.ExitUsage, err)
		}
		if c.Format == "table" {
			fmt.Fprintf(rio.Stdout, "# %s: %s\n%-22s %-24s %10s %10s %7s %s\n", t, sim.TableTitles[t], "row", "column", "spec", "sim", "off", "ok")
		}
		for _, k := range checks {
			if !k.OK() {
				bad++
			}
			if c.Format == "json" {
				if err := enc.Encode(map[string]any{"table": k.Table, "row": k.Row, "col": k.Col, "spec": k.Want, "sim": k.Got, "rel_err": k.Err(), "tol": k.Tol, "ok": k.OK()}); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(rio.Stdout, "%-22s %-24s %10.3f %10.3f %6.1f%% %v\n", k.Row, k.Col, k.Want, k.Got, 100*k.Err(), k.OK())
		}
	}
	if bad > 0 {
		return fmt.Errorf("sim: %d cells out of tolerance", bad)
	}
	rio.Log.Info("sim: every cell within tolerance", "tables", slices.Clone(tabs))
	return nil
}
