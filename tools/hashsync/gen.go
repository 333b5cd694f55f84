package main

import (
	"fmt"
	"sort"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"

	"trainwire.dev/tools/hashsync/internal/gen"
)

// GenCmd writes a deterministic sparse-gradient workload for one rank.
type GenCmd struct {
	Preset  string  `help:"Workload preset: deepfm (1M×16, d=2.80%), lstm (793471×512, d=1.13%), nmt (218750×512, d=2.47%), bert (30522×768, d=1.06%); Zipf model, s=1.0. Explicit flags override its fields." enum:"deepfm,lstm,nmt,bert," default:""`
	Model   string  `help:"Generator: zipf (embedding model), bernoulli (pool model, exact overlap), topk (DGC-like sparsification). Default: the preset's, else zipf."`
	Rank    int     `help:"Rank whose gradients to write." default:"0" env:"TRAINWIRE_RANK"`
	World   int     `help:"World size (ranks); only checks --rank." default:"1" env:"TRAINWIRE_WORLD"`
	Steps   int     `help:"Iterations (one frame per tensor per step)." default:"1"`
	Tensors int     `help:"Tensors per step (named PRESET.k when more than one)." default:"1"`
	Seed    uint64  `help:"Job seed; ranks, steps and tensors derive theirs from it." default:"1"`
	Rows    int     `help:"Rows of the tensor (overrides the preset)."`
	Numel   int     `help:"Elements of the tensor, rows×width (overrides --rows)."`
	Width   int     `help:"Elements per row: embedding dimension (1: element-level)."`
	Density float64 `help:"Fraction of rows present on one rank (d_G)." default:"-1"`
	Skew    float64 `help:"zipf: exponent s (more skew and overlap as it grows); bernoulli: the pool lies in the first rows/SKEW rows; topk: first-to-last layer scale ratio." default:"-1"`
	Overlap float64 `help:"bernoulli: inclusion probability q = expected pairwise overlap ratio; topk: signal share of the gradient (1: identical ranks)." default:"-1"`
	Exact   bool    `help:"Values are small multiples of 1/16, so sums are exact in any order (to compare schemes that sum in other orders bit for bit)."`
	Format  string  `help:"Frames to write: sparse (COO of row indices) or dense." enum:"sparse,dense" default:"sparse"`
	Name    string  `help:"Tensor name (default: the preset or model name)."`
}

// spec resolves the preset and the explicit flags.
func (c *GenCmd) spec() (gen.Spec, string, error) {
	s := gen.Spec{Model: "zipf", Rows: 100_000, Width: 1, Density: 0.01, Skew: 1.0, Overlap: 0.5}
	name := c.Preset
	if c.Preset != "" {
		p, ok := gen.Presets[c.Preset]
		if !ok {
			keys := make([]string, 0, len(gen.Presets))
			for k := range gen.Presets {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			return s, "", fmt.Errorf("unknown preset %q (want %s)", c.Preset, strings.Join(keys, ", "))
		}
		s = p
		if s.Overlap == 0 {
			s.Overlap = 0.5
		}
	}
	if c.Model != "" {
		s.Model = c.Model
		if c.Model == "bernoulli" && c.Skew < 0 {
			s.Skew = 1
		}
	}
	if name == "" {
		name = s.Model
	}
	if c.Width > 0 {
		s.Width = c.Width
	}
	if c.Rows > 0 {
		s.Rows = c.Rows
	}
	if c.Numel > 0 {
		if c.Numel%s.Width != 0 {
			return s, "", fmt.Errorf("--numel %d is not a whole number of rows of width %d", c.Numel, s.Width)
		}
		s.Rows = c.Numel / s.Width
	}
	if c.Density >= 0 {
		s.Density = c.Density
	}
	if c.Skew >= 0 {
		s.Skew = c.Skew
	}
	if c.Overlap >= 0 {
		s.Overlap = c.Overlap
	}
	s.Exact, s.Seed = c.Exact, c.Seed
	if c.Name != "" {
		name = c.Name
	}
	return s, name, s.Check()
}

// Run writes Steps×Tensors frames to stdout.
func (c *GenCmd) Run(rio *cli.IO) error {
	if c.World < 1 || c.Rank < 0 || c.Rank >= c.World {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("gen: --rank %d outside a world of %d", c.Rank, c.World))
	}
	if c.Steps < 0 || c.Tensors < 1 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("gen: --steps must be ≥ 0 and --tensors ≥ 1"))
	}
	s, name, err := c.spec()
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("gen: %w", err))
	}
	w := wire.NewWriter(rio.Stdout, "hashsync gen")
	w.SetMeta(map[string]string{"model": s.Model, "rows": fmt.Sprint(s.Rows), "width": fmt.Sprint(s.Width),
		"density": fmt.Sprint(s.Density), "skew": fmt.Sprint(s.Skew), "overlap": fmt.Sprint(s.Overlap),
		"seed": fmt.Sprint(s.Seed), "rank": fmt.Sprint(c.Rank), "world": fmt.Sprint(c.World)})
	bar := rio.Progress("gen", int64(c.Steps*c.Tensors), false)
	defer bar.Done()
	for step := range c.Steps {
		for k := range c.Tensors {
			n := name
			if c.Tensors > 1 {
				n = fmt.Sprintf("%s.%d", name, k)
			}
			t := s.Generate(n, c.Rank, step, k)
			fm := form{dense: c.Format == "dense", step: int64(step)}
			if fm.dense {
				fm.shape = []int64{int64(t.Rows), int64(t.Width)}
				if t.Width == 1 {
					fm.shape = fm.shape[:1]
				}
			}
			if err := w.Write(toFrame(t, fm, c.Rank)); err != nil {
				return err
			}
			bar.Add(1)
		}
	}
	return w.Close()
}
