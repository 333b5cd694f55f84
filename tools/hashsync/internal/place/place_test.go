package place

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// zipfTables is a DLRM-like set: table sizes and loads both skewed.
func zipfTables(n int) []Table {
	var ts []Table
	for i := range n {
		ts = append(ts, Table{Name: fmt.Sprintf("t%d", i), Rows: int64(1000 * (i%4 + 1) * (1 + i%3)), Dim: 16, ElemBytes: 4,
			Load: 100 / math.Pow(float64(i+1), 1.1)})
	}
	return ts
}

func caps(n int, c int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// TestSvenBalancesAgainstBaselines: on skewed tables, with memory tight
// (92 % full) and loose, Sven's plan is valid (within capacity) and its
// max load is below both baselines'; with memory tight round-robin's plan
// exceeds a capacity, and with memory loose Sven's load is within 5 % of
// the mean.
func TestSvenBalancesAgainstBaselines(t *testing.T) {
	tables := zipfTables(12)
	for _, c := range []int64{1 << 20, 2 << 20} {
		sv, err := Sven(tables, caps(4, c))
		require.NoError(t, err)
		require.NoError(t, sv.Check(tables))
		rr, err := RoundRobin(tables, caps(4, c))
		require.NoError(t, err)
		sg, err := SizeGreedy(tables, caps(4, c))
		require.NoError(t, err)
		s, r, g := sv.Summary(), rr.Summary(), sg.Summary()
		t.Logf("capacity %d: max load sven %.1f round-robin %.1f size-greedy %.1f (mean %.1f); max bytes %d %d %d (mean %d)",
			c, s.MaxLoad, r.MaxLoad, g.MaxLoad, s.MeanLoad, s.MaxBytes, r.MaxBytes, g.MaxBytes, s.MeanBytes)
		require.Less(t, s.MaxLoad, r.MaxLoad)
		require.Less(t, s.MaxLoad, g.MaxLoad)
		if c == 1<<20 {
			require.ErrorContains(t, rr.Check(tables), "over its capacity")
		} else {
			require.Less(t, s.Imbalance, 1.05)
		}
	}
}

// TestSvenSplitsTooLargeAndTooHot: a table larger than any rank is cut
// row-wise and placed; a table hotter than a rank's share is cut at its
// load quantiles (measured histogram), so its ranges carry equal load
// though its rows are not equally hot. The baselines cannot place the
// large table within capacity, and Check says so.
func TestSvenSplitsTooLargeAndTooHot(t *testing.T) {
	hist := make([]float64, 100)
	for i := range hist {
		hist[i] = 1000 / float64((i+1)*(i+1)) // rows at the start are hot
	}
	hot := Table{Name: "hot", Rows: 10000, Dim: 8, ElemBytes: 4, Hist: hist}
	for _, h := range hist {
		hot.Load += h
	}
	tables := []Table{
		{Name: "big", Rows: 100000, Dim: 16, ElemBytes: 4, Load: 1}, // 6.4 MB
		hot,
		{Name: "small", Rows: 100, Dim: 16, ElemBytes: 4, Load: 1},
	}
	c := caps(4, 4<<20)
	sv, err := Sven(tables, c)
	require.NoError(t, err)
	require.NoError(t, sv.Check(tables))
	var bigShards, hotShards []Shard
	for _, s := range sv.Shards {
		switch s.Table {
		case "big":
			bigShards = append(bigShards, s)
		case "hot":
			hotShards = append(hotShards, s)
		}
	}
	require.GreaterOrEqual(t, len(bigShards), 2)
	require.GreaterOrEqual(t, len(hotShards), 3)
	for _, s := range hotShards[:len(hotShards)-1] {
		require.InDelta(t, hot.Load/4, s.Load, hot.Load/4*0.35, "hot shard rows [%d, %d)", s.RowLo, s.RowHi)
	}
	rr, err := RoundRobin(tables, c)
	require.NoError(t, err)
	require.EqualError(t, rr.Check(tables), "place: rank 0 holds 6400000 bytes, over its capacity of 4194304")
}

// TestCheckRefusesBadPlans: every way a plan can be wrong is refused,
// naming the table, rows and rank.
func TestCheckRefusesBadPlans(t *testing.T) {
	tables := []Table{{Name: "a", Rows: 10, Dim: 2, ElemBytes: 4, Load: 1}, {Name: "b", Rows: 4, Dim: 1, ElemBytes: 4, Load: 1}}
	ok := []Shard{{Table: "a", RowLo: 0, RowHi: 6, Bytes: 48, Rank: 0}, {Table: "a", RowLo: 6, RowHi: 10, Bytes: 32, Rank: 1}, {Table: "b", RowLo: 0, RowHi: 4, Bytes: 16, Rank: 1}}
	p := Plan{Capacity: caps(2, 64), Shards: ok}
	require.NoError(t, p.Check(tables))
	for _, tc := range []struct {
		name  string
		edit  func(p *Plan)
		error string
	}{
		{"no rank", func(p *Plan) { p.Shards = p.Shards[:2] }, `place: table "b" is on no rank`},
		{"gap", func(p *Plan) { p.Shards[1].RowLo, p.Shards[1].Bytes = 7, 24 }, `place: table "a" rows [6, 7) are on no rank`},
		{"tail", func(p *Plan) { p.Shards[1].RowHi, p.Shards[1].Bytes = 9, 24 }, `place: table "a" rows [9, 10) are on no rank`},
		{"overlap", func(p *Plan) { p.Shards[1].RowLo, p.Shards[1].Bytes = 5, 40 }, `place: table "a" rows [5, 6) are on rank 0 and rank 1`},
		{"capacity", func(p *Plan) { p.Capacity[1] = 40 }, `place: rank 1 holds 48 bytes, over its capacity of 40`},
		{"unknown", func(p *Plan) { p.Shards[2].Table = "c" }, `place: plan has a shard of "c", which is not a table`},
		{"bad rank", func(p *Plan) { p.Shards[2].Rank = 2 }, `place: table "b" rows [0, 4) are on rank 2, not a rank of 2`},
		{"bytes", func(p *Plan) { p.Shards[2].Bytes = 15 }, `place: table "b" rows [0, 4): 15 bytes, want 16`},
		{"rows", func(p *Plan) { p.Shards[2].RowHi = 5 }, `place: table "b": shard rows [0, 5) are not within its 4 rows`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := Plan{Capacity: caps(2, 64), Shards: append([]Shard(nil), ok...)}
			tc.edit(&q)
			require.EqualError(t, q.Check(tables), tc.error)
		})
	}
}

// TestRefusals: inputs that cannot be placed are refused by name.
func TestRefusals(t *testing.T) {
	_, err := Sven([]Table{{Name: "a", Rows: 1000, Dim: 4, ElemBytes: 4, Load: 1}}, caps(2, 1000))
	require.EqualError(t, err, "place: sven: tables need 16000 bytes, the ranks hold 2000")
	_, err = Sven([]Table{{Name: "a", Rows: 10, Dim: 4, ElemBytes: 4}, {Name: "a", Rows: 1, Dim: 1, ElemBytes: 4}}, caps(2, 1000))
	require.EqualError(t, err, `place: table "a" given twice`)
	_, err = Sven([]Table{{Name: "a", Rows: 0, Dim: 4, ElemBytes: 4}}, caps(2, 1000))
	require.ErrorContains(t, err, "every size must be positive")
	_, err = Sven([]Table{{Name: "a", Rows: 1, Dim: 4, ElemBytes: 4}}, []int64{100, 0})
	require.EqualError(t, err, "place: rank 1 has a capacity of 0 bytes")
	// fits in total, but the rows of a range do not fit what is left
	_, err = Sven([]Table{{Name: "a", Rows: 3, Dim: 125, ElemBytes: 4, Load: 1}}, caps(2, 800))
	require.ErrorContains(t, err, `place: sven: table "a" rows`)
}

// TestSvenProperty: whatever the tables and capacities, a plan Sven
// returns passes Check, and it fails only when no rank has room.
func TestSvenProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 8).Draw(rt, "ranks")
		nt := rapid.IntRange(1, 20).Draw(rt, "tables")
		var tables []Table
		var total int64
		for i := range nt {
			tb := Table{Name: fmt.Sprint("t", i), Rows: rapid.Int64Range(1, 5000).Draw(rt, "rows"), Dim: rapid.Int64Range(1, 64).Draw(rt, "dim"),
				ElemBytes: 4, Load: rapid.Float64Range(0, 1000).Draw(rt, "load")}
			if rapid.Bool().Draw(rt, "hist") {
				tb.Hist = make([]float64, min(tb.Rows, 16))
				tb.Load = 0
				for b := range tb.Hist {
					tb.Hist[b] = rapid.Float64Range(0, 100).Draw(rt, "h")
					tb.Load += tb.Hist[b]
				}
			}
			tables = append(tables, tb)
			total += tb.Bytes()
		}
		slack := rapid.Float64Range(1.0, 3).Draw(rt, "slack")
		c := caps(n, int64(slack*float64(total)/float64(n))+64*4)
		p, err := Sven(tables, c)
		if err != nil {
			require.Contains(rt, err.Error(), "fit on no rank")
			return
		}
		require.NoError(rt, p.Check(tables))
		sum := 0.0
		for _, s := range p.Shards {
			sum += s.Load
		}
		require.InDelta(rt, totalLoad(tables), sum, 1e-6*(1+totalLoad(tables)))
	})
}
