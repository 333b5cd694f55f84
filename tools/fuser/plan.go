package main

import (
	"fmt"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/exit"
	"trainwire.dev/tools/fuser/internal/fusion"
)

// PlanCmd finds the fusion plan with the least predicted iteration time.
type PlanCmd struct {
	ModelFlags
	OutputFlags

	Algo       string         `help:"Search: auto (the exact search), alg51 (Cupcake's Algorithm 5.1, exact only for subadditive costs), pareto (exact Pareto-frontier DP, any cost shape), brute (every plan, N <= 24)." enum:"auto,alg51,pareto,brute" default:"auto" env:"TRAINWIRE_FUSER_ALGO"`
	Budget     time.Duration  `help:"Time budget of alg51; when it runs out the best plan so far is printed with proven_optimal false." default:"10s"`
	NoPrune1   bool           `help:"alg51 without its optimistic-outcome pruning (Table 5.1's ablation)."`
	NoPrune2   bool           `help:"alg51 without its j* pruning (Table 5.1's ablation)."`
	Buckets    []cli.ByteSize `help:"Bucket-fusion thresholds compared as baselines." default:"2MB,4MB,8MB,16MB,32MB,64MB,128MB" sep:","`
	EvenSplits []int          `help:"Even-split group counts compared as baselines." default:"2,4,8,16,32" sep:","`
}

// Run plans and writes the plan with its timeline and the baselines.
func (c *PlanCmd) Run(rio *cli.IO) error {
	p, m, costs, err := c.load(rio)
	if err != nil {
		return c.fail(rio, err)
	}
	o := fusion.Alg51Options{NoPrune1: c.NoPrune1, NoPrune2: c.NoPrune2}
	if c.Algo == fusion.AlgoAlg51 {
		o.Deadline = time.Now().Add(c.Budget)
	}
	bs := make([]float64, len(c.Buckets))
	for i, b := range c.Buckets {
		bs[i] = float64(b)
	}
	baselines := fusion.Baselines(p, bs, c.EvenSplits)
	best := baselines[0]
	for _, b := range baselines[1:] {
		if fusion.Better(b.Time, b.Groups, best.Time, best.Groups) {
			best = b
		}
	}
	o.Seed = best.Groups // the thesis's bootstrap: start alg51 from a good plan
	r, err := fusion.Plan(p, c.Algo, o)
	if err != nil {
		return c.fail(rio, cli.WithCode(cli.ExitUsage, err))
	}
	if !r.ProvenOptimal {
		why := "its budget ran out"
		if !p.Subadditive() {
			why = "the costs are not subadditive, so its prunings are unsound (use --algo pareto)"
		}
		rio.Log.Warn("plan is not proven optimal", "algo", r.Algo, "why", why)
	}
	rio.Log.Info("planned", "model", m.Name, "gradients", p.N(), "algo", r.Algo, "groups", len(r.Groups),
		"iter_ms", r.Time/1e6, "best_baseline", best.Label(), "baseline_ms", best.Time/1e6, "wall", r.Wall)
	return c.write(rio, report{model: m, p: p, r: r, baselines: baselines, costs: costs})
}

// fail writes the error in-band when the output is frames, so a tool
// reading the plan stream sees why there is no plan.
func (c *PlanCmd) fail(rio *cli.IO, err error) error {
	c.OutputFlags.fail(rio, err)
	return err
}

// EvalCmd predicts the iteration time and timeline of a given plan.
type EvalCmd struct {
	ModelFlags
	OutputFlags

	Plan   string `help:"A trainwire stream holding a plan frame (fuser plan writes one)." type:"existingfile" xor:"plan"`
	Groups string `help:"The groups by hand: first-last ranges, e.g. 0-3,4-4 (or 0-3,4)." xor:"plan"`
}

// Run evaluates the plan.
func (c *EvalCmd) Run(rio *cli.IO) error {
	p, m, costs, err := c.load(rio)
	if err != nil {
		c.fail(rio, err)
		return err
	}
	groups, err := c.groups()
	if err == nil {
		err = fusion.Check(groups, p.N())
		if err != nil {
			err = exit.BadInputf("plan does not fit the model's %d gradients: %v", p.N(), err)
		}
	}
	if err != nil {
		c.fail(rio, err)
		return err
	}
	t, steps := p.Eval(groups)
	r := fusion.Result{Groups: groups, Time: t, Steps: steps, Algo: "given"}
	return c.write(rio, report{model: m, p: p, r: r, costs: costs})
}

func (c *EvalCmd) groups() ([]fusion.Group, error) {
	switch {
	case c.Groups != "":
		return parseGroups(c.Groups)
	case c.Plan != "":
		return readPlan(c.Plan, c.Limits())
	}
	return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("give --plan FILE or --groups RANGES"))
}
