package main

import (
	"encoding/json"
	"fmt"

	"trainwire.dev/lib/cli"

	"trainwire.dev/tools/hashsync/internal/volume"
)

// ModelCmd prints the closed-form volume of every scheme.
type ModelCmd struct {
	N       []int   `help:"World sizes (comma-separated)." default:"2,4,8,16"`
	Rows    float64 `help:"Rows of the tensor (|G| when --width is 1)." default:"1000000"`
	Width   int     `help:"Elements per row." default:"1"`
	Density float64 `help:"Fraction of rows present on one rank (d_G)." default:"0.01"`
	Gamma   float64 `help:"Densification ratio γ^n at the largest --n (intermediate γ^k from the Bernoulli model with the same γ^n). Default: from --overlap." default:"0"`
	Overlap float64 `help:"Pairwise overlap ratio q of the Bernoulli model: γ^k = (1−(1−q)^k)/q (used when --gamma is 0)." default:"0.2"`
	Skew    float64 `help:"Even-range skewness s^n for sparse-ps and omnireduce (1: balanced)." default:"1"`
	Block   int     `help:"omnireduce block size, in elements." default:"256"`
	Rho     float64 `help:"hitopk density (0: lossless)." default:"0"`
	Local   int     `help:"hitopk ranks per node." default:"1"`
	Pull    string  `help:"zen's pull encoding: auto, bitmap or coo." enum:"auto,bitmap,coo" default:"auto"`
	Format  string  `help:"table or json (one object per n and scheme)." enum:"table,json" default:"table"`
}

// ModelRow is one line of model's JSON output.
type ModelRow struct {
	N       int                `json:"n"`
	Scheme  string             `json:"scheme"`
	Bytes   float64            `json:"bytes_per_rank"`
	VsDense float64            `json:"vs_dense"`
	Steps   map[string]float64 `json:"steps"`
	Note    string             `json:"note"`
	Choice  string             `json:"zen_rule_choice"`
}

// Run prints the table.
func (c *ModelCmd) Run(rio *cli.IO) error {
	if c.Rows <= 0 || c.Width < 1 || c.Density < 0 || c.Density > 1 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("model: need --rows > 0, --width ≥ 1 and --density in [0, 1]"))
	}
	maxN := 0
	for _, n := range c.N {
		if n < 1 {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("model: --n %d", n))
		}
		maxN = max(maxN, n)
	}
	gamma := volume.Bernoulli(c.Overlap)
	if c.Gamma > 0 {
		g, err := volume.FitGamma(maxN, c.Gamma)
		if err != nil {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("model: --gamma: %w", err))
		}
		gamma = g
	} else if !(c.Overlap > 0 && c.Overlap <= 1) {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("model: --overlap %g outside (0, 1]", c.Overlap))
	}
	enc := json.NewEncoder(rio.Stdout)
	if c.Format == "table" {
		fmt.Fprintf(rio.Stdout, "# payload bytes received per rank per step; %g rows × %d, d_G = %g, skew %g\n", c.Rows, c.Width, c.Density, c.Skew)
		fmt.Fprintf(rio.Stdout, "%4s %-12s %16s %10s  %s\n", "n", "scheme", "bytes", "vs dense", "formula")
	}
	for _, n := range c.N {
		local := c.Local
		if local < 1 || n%local != 0 {
			local = 1
		}
		p := volume.Params{N: n, Rows: c.Rows, Width: c.Width, Density: c.Density, Gamma: gamma, Skew: c.Skew, Block: c.Block, Rho: c.Rho, Local: local, Pull: c.Pull}
		choice, lhs, rhs := p.Choose()
		dense := p.Dense().Bytes
		for _, v := range p.All() {
			ratio := 0.0
			if dense > 0 {
				ratio = v.Bytes / dense
			}
			if c.Format == "json" {
				steps := map[string]float64{}
				for _, s := range v.Steps {
					steps[s.Name] = s.Bytes
				}
				if err := enc.Encode(ModelRow{N: n, Scheme: v.Scheme, Bytes: v.Bytes, VsDense: ratio, Steps: steps, Note: v.Note, Choice: choice}); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintf(rio.Stdout, "%4d %-12s %16.0f %10.4f  %s\n", n, v.Scheme, v.Bytes, ratio, v.Note)
		}
		if c.Format == "table" {
			fmt.Fprintf(rio.Stdout, "%4d %-12s γ^n = %.3f; Σγ^{2^{i−1}} = %.3f vs (n−1)/n·(γ^n+1) = %.3f → the rule picks %s\n", n, "rule", gamma(n), lhs, rhs, choice)
		}
	}
	return nil
}
