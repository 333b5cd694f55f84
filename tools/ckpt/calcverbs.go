package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"strings"
	"text/tabwriter"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/calc"
	"trainwire.dev/tools/ckpt/internal/placement"
)

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// PlanCmd is `ckpt plan`: Algorithm 6.1.
type PlanCmd struct {
	N      int    `name:"N" required:"" help:"Number of machines (ranks holding checkpoints)."`
	M      int    `name:"m" default:"2" help:"Replicas of each checkpoint, the local one included."`
	Failed []int  `help:"Failed machines (1-based, comma-separated): also print where the survivors put the temporary copies that restore m copies of each checkpoint (what the agents do after a hardware decision)."`
	Format string `help:"Output: table, json, or wire (a trainwire plan frame of kind placement)." enum:"table,json,wire" default:"table"`
}

type planMachine struct {
	Machine  int   `json:"machine"`
	Rank     int   `json:"rank"`
	Group    int   `json:"group"`
	SendsTo  []int `json:"sends_to"`
	Receives []int `json:"receives_from"`
	// Extra are the live machines that take a temporary copy of this
	// machine's checkpoint while --failed are down.
	Extra []int `json:"extra_copies_on,omitempty"`
}

type planOut struct {
	N          int           `json:"N"`
	M          int           `json:"m"`
	Strategy   string        `json:"strategy"`
	Groups     [][]int       `json:"groups"`
	UniqueSets int           `json:"unique_sets"`
	Machines   []planMachine `json:"machines"`
}

// Run prints the groups and who sends to whom (1-based machine IDs as in the
// thesis; rank = machine − 1).
func (c *PlanCmd) Run(rio *cli.IO) error {
	p, err := placement.Plan(c.N, c.M)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	for _, f := range c.Failed {
		if f < 1 || f > c.N {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("--failed %d: machines are 1…%d", f, c.N))
		}
	}
	extra := p.Extra(c.Failed)
	out := planOut{N: c.N, M: c.M, Strategy: p.Strategy, Groups: p.Groups, UniqueSets: p.UniqueSets()}
	for i := 1; i <= c.N; i++ {
		out.Machines = append(out.Machines, planMachine{Machine: i, Rank: i - 1, Group: p.GroupOf(i) + 1, SendsTo: p.Sends(i), Receives: p.Receives(i), Extra: extra[i]})
	}
	switch c.Format {
	case "json":
		return writeJSON(rio.Stdout, out)
	case "wire":
		w := wire.NewWriter(rio.Stdout, "ckpt/"+cli.Version)
		pl := &wire.Plan{Kind: "placement", Algo: "gemini-alg6.1", Meta: map[string]any{"N": int64(c.N), "m": int64(c.M), "strategy": p.Strategy, "unique_sets": int64(out.UniqueSets)}}
		for _, g := range p.Groups {
			pl.Groups = append(pl.Groups, [2]int64{int64(g[0]), int64(g[len(g)-1])})
		}
		for _, m := range out.Machines {
			sends := anyInts(m.SendsTo)
			item := map[string]any{"machine": int64(m.Machine), "group": int64(m.Group), "sends_to": sends}
			if len(m.Extra) > 0 {
				item["extra_copies_on"] = anyInts(m.Extra)
			}
			pl.Items = append(pl.Items, item)
		}
		if err := w.Write(pl); err != nil {
			return err
		}
		return w.Close()
	}
	tw := tabwriter.NewWriter(rio.Stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "N=%d m=%d strategy=%s groups=%v unique holder sets=%d\n", c.N, c.M, p.Strategy, p.Groups, out.UniqueSets)
	head, row := "machine\trank\tgroup\tsends to\treceives from", "%d\t%d\t%d\t%s\t%s"
	if len(c.Failed) > 0 {
		head += fmt.Sprintf("\textra copies on (failed %s)", ints(c.Failed))
	}
	fmt.Fprintln(tw, head)
	for _, m := range out.Machines {
		fmt.Fprintf(tw, row, m.Machine, m.Rank, m.Group, ints(m.SendsTo), ints(m.Receives))
		if len(c.Failed) > 0 {
			fmt.Fprintf(tw, "\t%s", ints(m.Extra))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func anyInts(v []int) []any {
	out := make([]any, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func ints(v []int) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ",")
}

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

// WastedCmd is `ckpt wasted`: Eq. 6.1 and the effective-training-time model.
type WastedCmd struct {
	TCkpt     time.Duration `name:"t-ckpt" required:"" help:"Checkpoint time t_ckpt (e.g. 42m, 3s)."`
	Interval  time.Duration `help:"Checkpoint interval 1/f (default max(t_ckpt, T_iter))."`
	TRtvl     time.Duration `name:"t-rtvl" help:"Retrieval time of the latest complete checkpoint."`
	Iter      time.Duration `help:"Iteration time T_iter (enforces 1/f ≥ T_iter and gives HighFreq's interval)."`
	Instances int           `help:"Also run the effective-training-time model (seed notes D.4.6) for this many instances (1.5% fail per day)."`
	Overhead  time.Duration `help:"Gemini's time lost per failure in the model (thesis: about 7 min for software failures)." default:"7m"`
	Serialize time.Duration `help:"HighFreq's blocking torch.save per checkpoint in the model." default:"81s"`
	HFIters   int           `name:"highfreq-iters" help:"HighFreq's interval in iterations in the model (default ⌈t_ckpt/T_iter⌉; the thesis's run used 9)."`
	Format    string        `help:"Output: table or json." enum:"table,json" default:"table"`
}

// Run prints T_wasted and, with --iter, HighFreq's interval.
func (c *WastedCmd) Run(rio *cli.IO) error {
	iv := c.Interval
	if iv == 0 {
		iv = max(c.TCkpt, c.Iter)
	}
	w, err := calc.Wasted(c.TCkpt.Seconds(), iv.Seconds(), c.TRtvl.Seconds(), c.Iter.Seconds())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	out := map[string]any{"t_ckpt_s": c.TCkpt.Seconds(), "interval_s": iv.Seconds(), "t_rtvl_s": c.TRtvl.Seconds(), "wasted_s": w}
	if c.Iter > 0 {
		out["iter_s"] = c.Iter.Seconds()
		out["highfreq_interval_iters"] = calc.HighFreqInterval(c.TCkpt.Seconds(), c.Iter.Seconds())
		out["interval_iters"] = iv.Seconds() / c.Iter.Seconds()
	}
	if c.Instances > 0 {
		r := calc.Simulate(calc.SimParams{FailuresPerDay: 0.015 * float64(c.Instances), GeminiOverhead: c.Overhead.Seconds(),
			Iter: c.Iter.Seconds(), TCkpt: c.TCkpt.Seconds(), TRtvl: c.TRtvl.Seconds(), Serialize: c.Serialize.Seconds(),
			Detect: 15, Restart: 240, StrawmanInterval: 3 * 3600, HighFreqIters: c.HFIters})
		out["failures_per_day"] = 0.015 * float64(c.Instances)
		out["effective_gemini"], out["effective_highfreq"], out["effective_strawman"] = r.Gemini, r.HighFreq, r.Strawman
	}
	if c.Format == "json" {
		return writeJSON(rio.Stdout, out)
	}
	fmt.Fprintf(rio.Stdout, "T_wasted = t_ckpt + 1/(2f) + t_rtvl = %v + %v/2 + %v = %v\n", c.TCkpt, iv, c.TRtvl, time.Duration(w*float64(time.Second)).Round(time.Millisecond))
	if c.Iter > 0 {
		fmt.Fprintf(rio.Stdout, "checkpoint every %.3g iterations; HighFreq would checkpoint every ⌈t_ckpt/T_iter⌉ = %d iterations\n", iv.Seconds()/c.Iter.Seconds(), out["highfreq_interval_iters"])
	}
	if c.Instances > 0 {
		fmt.Fprintf(rio.Stdout, "effective training time, %d instances (%.3g failures/day): gemini %.3f  highfreq %.3f  strawman %.3f\n",
			c.Instances, out["failures_per_day"], out["effective_gemini"], out["effective_highfreq"], out["effective_strawman"])
	}
	return nil
}
