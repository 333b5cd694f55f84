// Package place is Sven's static embedding placement (docs/sven.md,
// §6.1.3): embedding tables with sizes and access counts are cut into
// shards (whole tables, or row ranges of tables too large or too hot for
// one rank) and assigned to ranks so that both the memory per rank and
// the lookup load per rank are balanced, within each rank's capacity.
// The baselines are round-robin and size-greedy placement of whole
// tables. Check refuses any plan, made here or read from a frame, that
// leaves rows on no rank, puts rows on two ranks, or exceeds a capacity.
package place

import (
	"fmt"
	"math"
	"sort"
)

// Table is one embedding table: Rows rows of Dim elements of ElemBytes
// bytes, looked up Load times (per sample, or in total over a measured
// window: only ratios matter). Hist, when set, is the load of equal row
// buckets (bucket i covers rows [i·Rows/len, (i+1)·Rows/len)), measured
// from an index stream; it sums to Load.
type Table struct {
	Name      string
	Rows      int64
	Dim       int64
	ElemBytes int64
	Load      float64
	Hist      []float64
}

// MaxHistRows bounds the rows of a table with a histogram (bucket bounds
// are computed as b·Rows without overflow).
const MaxHistRows = 1 << 48

// Bytes is the table's size.
func (t *Table) Bytes() int64 { return t.Rows * t.Dim * t.ElemBytes }

// rowsBytes is the size of n rows.
func (t *Table) rowsBytes(n int64) int64 { return n * t.Dim * t.ElemBytes }

// LoadOf is the load of rows [lo, hi): from the histogram, rows within a
// bucket counted evenly, or in proportion to rows without one.
func (t *Table) LoadOf(lo, hi int64) float64 { return t.cum(hi) - t.cum(lo) }

// cum is the load of rows [0, row).
func (t *Table) cum(row int64) float64 {
	if t.Rows == 0 {
		return 0
	}
	if len(t.Hist) == 0 {
		return t.Load * float64(row) / float64(t.Rows)
	}
	nb := int64(len(t.Hist))
	s := 0.0
	for b := range nb {
		blo, bhi := b*t.Rows/nb, (b+1)*t.Rows/nb
		switch {
		case row >= bhi:
			s += t.Hist[b]
		case row > blo:
			s += t.Hist[b] * float64(row-blo) / float64(bhi-blo)
		}
	}
	return s
}

// Shard is rows [RowLo, RowHi) of table Table on rank Rank.
type Shard struct {
	Table        string
	RowLo, RowHi int64
	Bytes        int64
	Load         float64
	Rank         int
}

// Plan is a placement: every shard with its rank.
type Plan struct {
	Algo     string
	Capacity []int64 // bytes per rank
	Shards   []Shard
}

// Ranks is the number of ranks.
func (p *Plan) Ranks() int { return len(p.Capacity) }

// Per returns the bytes and the load on each rank.
func (p *Plan) Per() (bytes []int64, load []float64) {
	bytes, load = make([]int64, p.Ranks()), make([]float64, p.Ranks())
	for _, s := range p.Shards {
		if s.Rank >= 0 && s.Rank < p.Ranks() {
			bytes[s.Rank] += s.Bytes
			load[s.Rank] += s.Load
		}
	}
	return bytes, load
}

// Summary is what a plan costs: the largest memory and lookup load of any
// rank, against the mean load.
type Summary struct {
	MaxBytes  int64
	MeanBytes int64
	MaxLoad   float64
	MeanLoad  float64
	// Imbalance is MaxLoad / MeanLoad (1 is perfect; 0 without load).
	Imbalance float64
}

// Summary summarises the plan.
func (p *Plan) Summary() Summary {
	bytes, load := p.Per()
	var s Summary
	total := 0.0
	for r := range bytes {
		s.MaxBytes = max(s.MaxBytes, bytes[r])
		s.MaxLoad = max(s.MaxLoad, load[r])
		total += load[r]
		s.MeanBytes += bytes[r]
	}
	if len(load) > 0 {
		s.MeanLoad = total / float64(len(load))
		s.MeanBytes /= int64(len(load))
	}
	if s.MeanLoad > 0 {
		s.Imbalance = s.MaxLoad / s.MeanLoad
	}
	return s
}

// CheckTables refuses tables that cannot be placed: none, a name twice,
// an empty or negative size, a negative or non-finite load, a histogram
// that does not fit the rows.
func CheckTables(tables []Table) error {
	if len(tables) == 0 {
		return fmt.Errorf("place: no tables")
	}
	seen := map[string]bool{}
	var total int64
	for i, t := range tables {
		switch {
		case t.Name == "":
			return fmt.Errorf("place: table %d has no name", i)
		case seen[t.Name]:
			return fmt.Errorf("place: table %q given twice", t.Name)
		case t.Rows <= 0 || t.Dim <= 0 || t.ElemBytes <= 0:
			return fmt.Errorf("place: table %q: %d rows of %d elements of %d bytes: every size must be positive", t.Name, t.Rows, t.Dim, t.ElemBytes)
		case t.Rows > math.MaxInt64/t.Dim/t.ElemBytes:
			return fmt.Errorf("place: table %q: %d×%d×%d bytes overflows", t.Name, t.Rows, t.Dim, t.ElemBytes)
		case t.Load < 0 || math.IsNaN(t.Load) || math.IsInf(t.Load, 0):
			return fmt.Errorf("place: table %q: load %v", t.Name, t.Load)
		case len(t.Hist) > 0 && t.Rows > MaxHistRows:
			return fmt.Errorf("place: table %q: %d rows, more than %d with a histogram", t.Name, t.Rows, int64(MaxHistRows))
		case int64(len(t.Hist)) > t.Rows:
			return fmt.Errorf("place: table %q: %d histogram buckets for %d rows", t.Name, len(t.Hist), t.Rows)
		}
		if total += t.Bytes(); total < 0 {
			return fmt.Errorf("place: the tables' bytes overflow at table %q", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}

// CheckCapacity refuses an empty world or a capacity that is not positive.
func CheckCapacity(capacity []int64) error {
	if len(capacity) == 0 {
		return fmt.Errorf("place: no ranks")
	}
	for r, c := range capacity {
		if c <= 0 {
			return fmt.Errorf("place: rank %d has a capacity of %d bytes", r, c)
		}
	}
	return nil
}

// Check refuses a plan that does not place tables exactly once within
// the capacities: a shard of an unknown table or on no rank, a table
// with no shard, rows on no rank or on two ranks, a shard whose bytes are
// not its rows', a rank over its capacity. Errors name the table, rows
// and rank.
func (p *Plan) Check(tables []Table) error {
	if err := CheckCapacity(p.Capacity); err != nil {
		return err
	}
	byName := map[string]*Table{}
	for i := range tables {
		byName[tables[i].Name] = &tables[i]
	}
	shards := map[string][]Shard{}
	for _, s := range p.Shards {
		t := byName[s.Table]
		switch {
		case t == nil:
			return fmt.Errorf("place: plan has a shard of %q, which is not a table", s.Table)
		case s.Rank < 0 || s.Rank >= p.Ranks():
			return fmt.Errorf("place: table %q rows [%d, %d) are on rank %d, not a rank of %d", s.Table, s.RowLo, s.RowHi, s.Rank, p.Ranks())
		case s.RowLo < 0 || s.RowHi <= s.RowLo || s.RowHi > t.Rows:
			return fmt.Errorf("place: table %q: shard rows [%d, %d) are not within its %d rows", s.Table, s.RowLo, s.RowHi, t.Rows)
		case s.Bytes != t.rowsBytes(s.RowHi-s.RowLo):
			return fmt.Errorf("place: table %q rows [%d, %d): %d bytes, want %d", s.Table, s.RowLo, s.RowHi, s.Bytes, t.rowsBytes(s.RowHi-s.RowLo))
		}
		shards[s.Table] = append(shards[s.Table], s)
	}
	for _, t := range tables {
		if err := checkCover(t, shards[t.Name]); err != nil {
			return err
		}
	}
	bytes, _ := p.Per()
	for r, b := range bytes {
		if b > p.Capacity[r] {
			return fmt.Errorf("place: rank %d holds %d bytes, over its capacity of %d", r, b, p.Capacity[r])
		}
	}
	return nil
}

// checkCover checks that a table's shards tile its rows exactly once.
func checkCover(t Table, ss []Shard) error {
	if len(ss) == 0 {
		return fmt.Errorf("place: table %q is on no rank", t.Name)
	}
	sort.Slice(ss, func(i, j int) bool { return ss[i].RowLo < ss[j].RowLo })
	next := int64(0)
	for i, s := range ss {
		if s.RowLo > next {
			return fmt.Errorf("place: table %q rows [%d, %d) are on no rank", t.Name, next, s.RowLo)
		}
		if s.RowLo < next {
			return fmt.Errorf("place: table %q rows [%d, %d) are on rank %d and rank %d", t.Name, s.RowLo, min(next, s.RowHi), ss[i-1].Rank, s.Rank)
		}
		next = s.RowHi
	}
	if next != t.Rows {
		return fmt.Errorf("place: table %q rows [%d, %d) are on no rank", t.Name, next, t.Rows)
	}
	return nil
}
