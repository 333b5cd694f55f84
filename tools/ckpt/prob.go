package main

import (
	"fmt"
	"math/big"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/tools/ckpt/internal/placement"
)

// ProbCmd is `ckpt prob`: recovery probability from CPU memory.
type ProbCmd struct {
	N      int    `name:"N" required:"" help:"Number of machines."`
	M      int    `name:"m" default:"2" help:"Replicas of each checkpoint, the local one included."`
	K      []int  `name:"k" help:"Simultaneous failures (comma-separated; default m)."`
	Format string `help:"Output: table or json." enum:"table,json" default:"table"`
}

type probRow struct {
	N, M, K int
	// Bound is Corollary 6.1's (meaningful for m | N).
	Bound *float64 `json:"bound,omitempty"`
	// Exact is the inclusion–exclusion value (group placement, m | N).
	Exact *float64 `json:"exact_group,omitempty"`
	// Enumerated is the exact value for Algorithm 6.1's placement by
	// walking every k-subset (N ≤ 22): recoverable/total.
	Enumerated  *float64 `json:"enumerated,omitempty"`
	Recoverable int64    `json:"recoverable_sets,omitempty"`
	Subsets     int64    `json:"subsets,omitempty"`
	// Mixed (m ∤ N) at k = m: exact 1 − n/C(N,m), upper bound, gap.
	Mixed      *float64 `json:"mixed,omitempty"`
	UniqueSets int      `json:"unique_sets"`
	UpperBound *float64 `json:"upper_bound,omitempty"`
	Gap        *float64 `json:"gap,omitempty"`
	GapBound   *float64 `json:"gap_bound,omitempty"`
	// Ring baseline (i stores on i … i+m−1 mod N).
	RingExact      *float64 `json:"ring_exact,omitempty"`
	RingUnionBound float64  `json:"ring_union_bound"`
}

func fp(v float64) *float64 { return &v }

// Run prints one row per k.
func (c *ProbCmd) Run(rio *cli.IO) error {
	p, err := placement.Plan(c.N, c.M)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	ks := c.K
	if len(ks) == 0 {
		ks = []int{c.M}
	}
	var rows []probRow
	for _, k := range ks {
		if k < 0 || k > c.N {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("--k %d: must be in [0, N=%d]", k, c.N))
		}
		r := probRow{N: c.N, M: c.M, K: k, UniqueSets: p.UniqueSets(), RingUnionBound: placement.RingUnionBound(c.N, c.M, k)}
		if c.N%c.M == 0 {
			r.Bound = fp(placement.Bound(c.N, c.M, k))
			ex, _ := placement.ExactGroup(c.N, c.M, k)
			r.Exact = fp(ex)
		} else if k == c.M {
			pm := placement.AtM(c.N, c.M, r.UniqueSets)
			ub := placement.UpperBound(c.N, c.M)
			r.Mixed, r.UpperBound, r.Gap, r.GapBound = fp(pm), fp(ub), fp(ub-pm), fp(placement.GapBound(c.N, c.M))
		}
		if c.N <= placement.MaxEnumerate {
			ok, tot, err := placement.Enumerate(c.N, k, p.Sets())
			if err != nil {
				return err
			}
			r.Enumerated, r.Recoverable, r.Subsets = fp(float64(ok)/float64(tot)), ok, tot
			ok, tot, _ = placement.Enumerate(c.N, k, placement.Ring(c.N, c.M))
			r.RingExact = fp(float64(ok) / float64(tot))
		}
		rows = append(rows, r)
	}
	if c.Format == "json" {
		return writeJSON(rio.Stdout, rows)
	}
	tw := tabwriter.NewWriter(rio.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "N=%d m=%d strategy=%s unique holder sets=%d (C(N,m)=%s)\n", c.N, c.M, p.Strategy, p.UniqueSets(), new(big.Int).Binomial(int64(c.N), int64(c.M)))
	fmt.Fprintln(tw, "k\tCor.6.1 bound\texact (incl.-excl.)\tenumerated\tmixed (k=m)\tupper bound\tgap\tgap bound\tring exact\tring union bound")
	for _, r := range rows {
		enum := "-"
		if r.Enumerated != nil {
			enum = fmt.Sprintf("%.4f (%d/%d)", *r.Enumerated, r.Recoverable, r.Subsets)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4f\n", r.K, f4(r.Bound), f4(r.Exact), enum, f4(r.Mixed), f4(r.UpperBound), f4(r.Gap), f4(r.GapBound), f4(r.RingExact), r.RingUnionBound)
	}
	return tw.Flush()
}

func f4(v *float64) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprintf("%.4f", *v)
}
