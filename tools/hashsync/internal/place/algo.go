package place

import (
	"fmt"
	"slices"
	"sort"
)

// Algos are the placement algorithms by name: Sven's and the baselines.
var Algos = map[string]func([]Table, []int64) (*Plan, error){
	"sven":        Sven,
	"round-robin": RoundRobin,
	"size-greedy": SizeGreedy,
}

// AlgoNames lists Algos in the order reports show them.
var AlgoNames = []string{"sven", "round-robin", "size-greedy"}

func totalLoad(tables []Table) float64 {
	s := 0.0
	for _, t := range tables {
		s += t.Load
	}
	return s
}

// Split cuts the tables into shards (docs/sven.md, placement step 1): a
// table is cut into row ranges when it is larger than the largest
// capacity C_max or hotter than one rank's fair share L̄ = Σ load / n.
// A hot table is cut into n ranges at its load quantiles Load/n (ranges of
// equal load, not of equal rows: the histogram says where the hot rows
// are), each also closed before it outgrows min(C_max, ⌈Σ bytes / n⌉) bytes
// when the table does not fit C_max (pieces of the mean memory per rank
// pack well); their rank is −1.
func Split(tables []Table, capacity []int64) []Shard {
	n := len(capacity)
	cmax := slices.Max(capacity)
	mean := totalLoad(tables) / float64(n)
	var meanBytes int64
	for i := range tables {
		meanBytes += tables[i].Bytes()
	}
	meanBytes = (meanBytes + int64(n) - 1) / int64(n)
	var out []Shard
	for i := range tables {
		t := &tables[i]
		k := int64(1)
		if mean > 0 && t.Load > mean*(1+1e-9) {
			k = int64(n) // row-wise over every rank, as TorchRec's row-wise sharding
		}
		maxRows := t.Rows
		if t.Bytes() > cmax {
			maxRows = max(min(cmax, meanBytes)/t.rowsBytes(1), 1)
		}
		if k == 1 && t.Rows <= maxRows {
			out = append(out, Shard{Table: t.Name, RowLo: 0, RowHi: t.Rows, Bytes: t.Bytes(), Load: t.Load, Rank: -1})
			continue
		}
		target := t.Load / float64(k)
		for lo := int64(0); lo < t.Rows; {
			hi := min(lo+maxRows, t.Rows)
			if target > 0 {
				// the first row at which [lo, row) reaches the target
				base := t.cum(lo)
				j := sort.Search(int(hi-lo), func(d int) bool { return t.cum(lo+int64(d)+1)-base >= target*(1-1e-9) })
				hi = min(hi, lo+int64(j)+1)
			}
			out = append(out, Shard{Table: t.Name, RowLo: lo, RowHi: hi, Bytes: t.rowsBytes(hi - lo), Load: t.LoadOf(lo, hi), Rank: -1})
			lo = hi
		}
	}
	return out
}

// Sven places the shards of Split greedily (docs/sven.md, placement step
// 2), largest dominant share first — max(load / L̄, bytes / B̄), B̄ the mean
// bytes per rank — each onto the rank with room (preferring ranks that
// hold no other range of its table) that keeps the plan's cost lowest:
// max(max_r load_r / L̄, max_r bytes_r / C_r), so memory counts as the
// fraction of capacity used and load as the share of the mean. A shard
// that fits on no rank is an error naming it.
func Sven(tables []Table, capacity []int64) (*Plan, error) {
	if err := check(tables, capacity); err != nil {
		return nil, err
	}
	var need, have int64
	for i := range tables {
		need += tables[i].Bytes()
	}
	for _, c := range capacity {
		have += c
	}
	if need > have {
		return nil, fmt.Errorf("place: sven: tables need %d bytes, the ranks hold %d", need, have)
	}
	shards := Split(tables, capacity)
	meanL, meanB := totalLoad(tables)/float64(len(capacity)), float64(need)/float64(len(capacity))
	share := func(s Shard) float64 {
		d := float64(s.Bytes) / meanB
		if meanL > 0 {
			d = max(d, s.Load/meanL)
		}
		return d
	}
	sort.SliceStable(shards, func(i, j int) bool { return share(shards[i]) > share(shards[j]) })
	g := greedy{capacity: capacity, meanL: meanL, meanB: meanB, bytes: make([]int64, len(capacity)), load: make([]float64, len(capacity)), holds: map[string][]bool{}}
	for i := range shards {
		s := &shards[i]
		best := g.pick(s, true)
		if best < 0 {
			best = g.pick(s, false)
		}
		if best < 0 {
			return nil, fmt.Errorf("place: sven: table %q rows [%d, %d) (%d bytes) fit on no rank: free bytes per rank %v", s.Table, s.RowLo, s.RowHi, s.Bytes, free(capacity, g.bytes))
		}
		g.put(s, best)
	}
	return &Plan{Algo: "sven", Capacity: capacity, Shards: shards}, nil
}

// greedy is the state of Sven's assignment: bytes and load per rank, and
// which ranks hold a shard of each table.
type greedy struct {
	capacity     []int64
	meanL, meanB float64
	bytes        []int64
	load         []float64
	holds        map[string][]bool
	maxM, maxL   float64 // the fullest rank's bytes / C_r and the largest load / L̄ so far
}

// pick returns the rank with room for s that keeps the plan's cost
// lowest: the larger of max_r load_r / L̄ and max_r bytes_r / C_r (the
// fullest rank) after adding s, then the sum of the two, then the rank's
// own two;
// with apart, only among ranks holding no other shard of s's table. −1 if
// none.
func (g *greedy) pick(s *Shard, apart bool) int {
	best, bestKey := -1, [3]float64{}
	for r := range g.capacity {
		if g.bytes[r]+s.Bytes > g.capacity[r] || (apart && g.holds[s.Table] != nil && g.holds[s.Table][r]) {
			continue
		}
		m, l := float64(g.bytes[r]+s.Bytes)/float64(g.capacity[r]), 0.0
		if g.meanL > 0 {
			l = (g.load[r] + s.Load) / g.meanL
		}
		gm, gl := max(g.maxM, m), max(g.maxL, l)
		key := [3]float64{max(gm, gl), gm + gl, m + l}
		if best < 0 || less(key, bestKey) {
			best, bestKey = r, key
		}
	}
	return best
}

func less(a, b [3]float64) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

func (g *greedy) put(s *Shard, r int) {
	s.Rank = r
	g.bytes[r] += s.Bytes
	g.load[r] += s.Load
	g.maxM = max(g.maxM, float64(g.bytes[r])/float64(g.capacity[r]))
	if g.meanL > 0 {
		g.maxL = max(g.maxL, g.load[r]/g.meanL)
	}
	if g.holds[s.Table] == nil {
		g.holds[s.Table] = make([]bool, len(g.capacity))
	}
	g.holds[s.Table][r] = true
}

func free(capacity, bytes []int64) []int64 {
	f := make([]int64, len(capacity))
	for r := range f {
		f[r] = capacity[r] - bytes[r]
	}
	return f
}

func check(tables []Table, capacity []int64) error {
	if err := CheckTables(tables); err != nil {
		return err
	}
	return CheckCapacity(capacity)
}

func whole(t *Table, rank int) Shard {
	return Shard{Table: t.Name, RowLo: 0, RowHi: t.Rows, Bytes: t.Bytes(), Load: t.Load, Rank: rank}
}

// RoundRobin places table i, whole, on rank i mod n (the baseline; it
// may exceed a capacity, which Check refuses).
func RoundRobin(tables []Table, capacity []int64) (*Plan, error) {
	if err := check(tables, capacity); err != nil {
		return nil, err
	}
	p := &Plan{Algo: "round-robin", Capacity: capacity}
	for i := range tables {
		p.Shards = append(p.Shards, whole(&tables[i], i%len(capacity)))
	}
	return p, nil
}

// SizeGreedy places whole tables, largest first, each on the rank with
// the most free bytes (the baseline that balances memory only).
func SizeGreedy(tables []Table, capacity []int64) (*Plan, error) {
	if err := check(tables, capacity); err != nil {
		return nil, err
	}
	order := make([]int, len(tables))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return tables[order[a]].Bytes() > tables[order[b]].Bytes() })
	p := &Plan{Algo: "size-greedy", Capacity: capacity}
	bytes := make([]int64, len(capacity))
	for _, i := range order {
		best := 0
		for r := range capacity {
			if capacity[r]-bytes[r] > capacity[best]-bytes[best] {
				best = r
			}
		}
		bytes[best] += tables[i].Bytes()
		p.Shards = append(p.Shards, whole(&tables[i], best))
	}
	return p, nil
}
