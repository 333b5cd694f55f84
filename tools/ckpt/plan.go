package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/placement"
)

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
