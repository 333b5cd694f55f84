package main

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"

	"trainwire.dev/tools/hashsync/internal/place"
)

// histBuckets is the resolution of the access histograms measured from an
// index stream (docs/sven.md: row-wise cuts at load quantiles).
const histBuckets = 1024

// PlaceCmd plans where embedding tables live (Sven's static placement,
// docs/sven.md), or checks a plan.
type PlaceCmd struct {
	cli.WireFlags
	Table      []string       `help:"A table: NAME:ROWS:DIM[:LOAD] (LOAD: lookups per sample, or any count; default 1). Repeat, or separate with commas." sep:","`
	Indices    []string       `help:"Index streams to measure tables and access counts from: sparse frames, one per table and step (e.g. hashsync gen); each listed row counts one lookup." type:"path"`
	Model      []string       `help:"Model streams (profiler model): every gradient whose name matches --model-match is an embedding table of --model-dim columns (rows: numel / dim; element bytes: bytes / numel; load 1); the table is named after the gradient, without its .weight." type:"path"`
	ModelMatch string         `help:"Regular expression picking the embedding tables among a model frame's gradients." default:"^emb|[._]emb"`
	ModelDim   int64          `help:"Columns of the tables read from --model (their embedding dimension)."`
	Check      string         `help:"Check this plan stream instead of planning: every table on a rank, every row exactly once, every rank within its capacity." type:"path"`
	Ranks      int            `help:"Ranks to place on." env:"TRAINWIRE_WORLD"`
	Capacity   cli.ByteSize   `help:"Bytes of embedding memory per rank." default:"16GiB"`
	Capacities []cli.ByteSize `help:"Bytes per rank, one per rank (overrides --capacity and --ranks)." sep:","`
	ElemBytes  int64          `help:"Bytes per embedding element." default:"4"`
	Algo       string         `help:"sven (split and balance memory and load), round-robin or size-greedy (the baselines)." enum:"sven,round-robin,size-greedy" default:"sven"`
	Format     string         `help:"Output: frames (a trainwire plan stream, for tools), json or table (for people); auto is table on a terminal, frames otherwise." enum:"auto,frames,json,table" default:"auto" env:"TRAINWIRE_FORMAT"`
}

// Run plans (or checks) and writes the plan, with the baselines' costs.
func (c *PlaceCmd) Run(rio *cli.IO) error {
	if c.Check != "" {
		return c.runCheck(rio)
	}
	capacity, err := c.capacity()
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	tables, err := c.tables(rio)
	if err != nil {
		return err
	}
	if err := place.CheckTables(tables); err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	p, err := place.Algos[c.Algo](tables, capacity)
	if err == nil {
		err = p.Check(tables)
	}
	if err != nil {
		return fmt.Errorf("place: %s: no plan: %w", c.Algo, err)
	}
	return writePlan(rio, c.Format, report{plan: p, tables: tables, baselines: baselines(tables, capacity)})
}

func (c *PlaceCmd) runCheck(rio *cli.IO) error {
	var plans []*wire.Plan
	err := cli.EachFrame([]string{c.Check}, rio.Stdin, c.Limits(), false, func(f wire.Frame) error {
		if p, ok := f.(*wire.Plan); ok {
			plans = append(plans, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(plans) != 1 {
		return cli.WithCode(cli.ExitBadInput, fmt.Errorf("place: %s: %d plan frames, want 1", c.Check, len(plans)))
	}
	p, tables, err := place.FromFrame(plans[0])
	if err != nil {
		return cli.WithCode(cli.ExitBadInput, fmt.Errorf("%s: refused: %w", c.Check, err))
	}
	return writePlan(rio, c.Format, report{plan: p, tables: tables})
}

// capacity is the capacity per rank the flags give.
func (c *PlaceCmd) capacity() ([]int64, error) {
	if len(c.Capacities) > 0 {
		out := make([]int64, len(c.Capacities))
		for r, b := range c.Capacities {
			out[r] = int64(b)
		}
		return out, place.CheckCapacity(out)
	}
	if c.Ranks < 1 {
		return nil, fmt.Errorf("place: --ranks (TRAINWIRE_WORLD) must be at least 1, or give --capacities")
	}
	out := make([]int64, c.Ranks)
	for r := range out {
		out[r] = int64(c.Capacity)
	}
	return out, place.CheckCapacity(out)
}

// tables are the tables of --table and those measured from --indices.
func (c *PlaceCmd) tables(rio *cli.IO) ([]place.Table, error) {
	var out []place.Table
	for _, spec := range c.Table {
		t, err := parseTable(spec, c.ElemBytes)
		if err != nil {
			return nil, cli.WithCode(cli.ExitUsage, err)
		}
		out = append(out, t)
	}
	if len(c.Model) > 0 {
		ts, err := c.modelTables(rio)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	if len(c.Indices) > 0 {
		m := &measurer{elemBytes: c.ElemBytes, byName: map[string]int{}}
		if err := cli.EachFrame(c.Indices, rio.Stdin, c.Limits(), false, m.frame); err != nil {
			return nil, err
		}
		out = append(out, m.tables...)
	}
	if len(out) == 0 {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("place: no tables: give --table, --model or --indices"))
	}
	return out, nil
}

// parseTable parses NAME:ROWS:DIM[:LOAD].
func parseTable(spec string, elemBytes int64) (place.Table, error) {
	f := strings.Split(spec, ":")
	if len(f) < 3 || len(f) > 4 {
		return place.Table{}, fmt.Errorf("place: --table %q: want NAME:ROWS:DIM[:LOAD]", spec)
	}
	t := place.Table{Name: f[0], ElemBytes: elemBytes, Load: 1}
	var err error
	if t.Rows, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return t, fmt.Errorf("place: --table %q: rows: %w", spec, err)
	}
	if t.Dim, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return t, fmt.Errorf("place: --table %q: dim: %w", spec, err)
	}
	if len(f) == 4 {
		if t.Load, err = strconv.ParseFloat(f[3], 64); err != nil {
			return t, fmt.Errorf("place: --table %q: load: %w", spec, err)
		}
	}
	return t, nil
}

// measurer builds tables from an index stream: each sparse frame is one
// step's lookups of the table it names.
type measurer struct {
	elemBytes int64
	tables    []place.Table
	byName    map[string]int
	frames    int
}

func (m *measurer) frame(f wire.Frame) error {
	m.frames++
	s, ok := f.(*wire.Sparse)
	if !ok {
		return cli.WithCode(cli.ExitBadInput, fmt.Errorf("place: --indices: data frame %d is %s, want sparse (rows looked up)", m.frames, f.Type()))
	}
	rows := s.Rows()
	if rows > place.MaxHistRows {
		return cli.WithCode(cli.ExitBadInput, fmt.Errorf("place: --indices: data frame %d: table %q has %d rows, more than %d to measure", m.frames, s.Name, rows, int64(place.MaxHistRows)))
	}
	i, seen := m.byName[s.Name]
	if !seen {
		i = len(m.tables)
		m.byName[s.Name] = i
		m.tables = append(m.tables, place.Table{Name: s.Name, Rows: rows, Dim: s.Width, ElemBytes: m.elemBytes, Hist: make([]float64, min(rows, histBuckets))})
	}
	t := &m.tables[i]
	if t.Rows != rows || t.Dim != s.Width {
		return cli.WithCode(cli.ExitBadInput, fmt.Errorf("place: --indices: data frame %d: table %q has %d rows of %d, earlier %d of %d", m.frames, s.Name, rows, s.Width, t.Rows, t.Dim))
	}
	nb := int64(len(t.Hist))
	eachRow(s, func(row int64) {
		t.Hist[row*nb/rows]++
		t.Load++
	})
	return nil
}

// eachRow calls fn with every row a sparse frame lists (the reader has
// checked them against its rows).
func eachRow(s *wire.Sparse, fn func(int64)) {
	switch {
	case s.Format == wire.Bitmap:
		for i, b := range s.Indices {
			for bit := range 8 {
				if b>>bit&1 != 0 {
					fn(int64(i*8 + bit))
				}
			}
		}
	case s.IType == wire.U32:
		for k := range s.Nnz {
			fn(int64(binary.LittleEndian.Uint32(s.Indices[4*k:])))
		}
	default:
		for k := range s.Nnz {
			fn(int64(binary.LittleEndian.Uint64(s.Indices[8*k:])))
		}
	}
}

func baselines(tables []place.Table, capacity []int64) []baseline {
	var out []baseline
	for _, name := range place.AlgoNames {
		p, err := place.Algos[name](tables, capacity)
		if err == nil {
			err = p.Check(tables)
		}
		out = append(out, baseline{algo: name, plan: p, err: err})
	}
	return out
}
