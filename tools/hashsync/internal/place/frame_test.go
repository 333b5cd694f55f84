package place

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// TestFrameRoundTrip: a plan written as a frame and read back through the
// wire is the same plan, with the same tables.
func TestFrameRoundTrip(t *testing.T) {
	tables := zipfTables(7)
	p, err := Sven(tables, caps(3, 1<<20))
	require.NoError(t, err)
	var buf bytes.Buffer
	w := wire.NewWriter(&buf, "test")
	require.NoError(t, w.Write(p.Frame(tables)))
	require.NoError(t, w.Close())
	f, err := wire.NewReader(&buf, wire.Limits{}).Next()
	require.NoError(t, err)
	q, qt, err := FromFrame(f.(*wire.Plan))
	require.NoError(t, err)
	require.Equal(t, p, q)
	require.Equal(t, tables, qt)
}

// TestFromFrameRefuses: a frame of another kind, a missing or mistyped
// field, or a plan that does not place the tables is refused, naming it.
func TestFromFrameRefuses(t *testing.T) {
	tables := []Table{{Name: "a", Rows: 4, Dim: 2, ElemBytes: 4, Load: 1}}
	p := &Plan{Algo: "sven", Capacity: caps(2, 100), Shards: []Shard{{Table: "a", RowLo: 0, RowHi: 4, Bytes: 32, Load: 1, Rank: 1}}}
	for _, tc := range []struct {
		name string
		edit func(f *wire.Plan)
		want string
	}{
		{"kind", func(f *wire.Plan) { f.Kind = "fusion" }, `place: plan of kind "fusion", want "embedding"`},
		{"capacity", func(f *wire.Plan) { f.Meta["capacity"] = "x" }, `place: plan meta: field "capacity" is string, want an array of ints`},
		{"ranks", func(f *wire.Plan) { f.Meta["ranks"] = int64(3) }, `place: plan meta: field "ranks" is 3, want 2 (the capacities)`},
		{"table field", func(f *wire.Plan) { f.Meta["tables"].([]any)[0].(map[string]any)["rows"] = "4" }, `place: plan meta: table 0: field "rows" is string, want an int`},
		{"item field", func(f *wire.Plan) { delete(f.Items[0], "row_hi") }, `place: plan item 0: field "row_hi" is <nil>, want an int`},
		{"negative rank", func(f *wire.Plan) { f.Items[0]["rank"] = int64(-1) }, `place: plan item 0: field "rank" is -1`},
		{"no rank", func(f *wire.Plan) { f.Items = nil }, `place: table "a" is on no rank`},
		{"over capacity", func(f *wire.Plan) { f.Meta["capacity"] = []any{int64(100), int64(31)} }, `place: rank 1 holds 32 bytes, over its capacity of 31`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := p.Frame(tables)
			tc.edit(f)
			_, _, err := FromFrame(f)
			require.EqualError(t, err, tc.want)
		})
	}
}

// FuzzPlanFrame feeds arbitrary streams to FromFrame: it must refuse what
// is not a valid placement, never panic, and what it accepts must pass
// Check and survive a round trip.
func FuzzPlanFrame(f *testing.F) {
	tables := zipfTables(5)
	p, _ := Sven(tables, caps(3, 1<<20))
	var seed bytes.Buffer
	w := wire.NewWriter(&seed, "fuzz")
	_ = w.Write(p.Frame(tables))
	_ = w.Close()
	f.Add(seed.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		rd := wire.NewReader(bytes.NewReader(b), wire.Limits{MaxPayload: 1 << 16, MaxElems: 1 << 10})
		for range 4 {
			fr, err := rd.Next()
			if err != nil {
				return
			}
			pf, ok := fr.(*wire.Plan)
			if !ok {
				continue
			}
			q, qt, err := FromFrame(pf)
			if err != nil {
				continue
			}
			if err := q.Check(qt); err != nil {
				t.Fatalf("accepted a plan Check refuses: %v", err)
			}
			if _, _, err := FromFrame(q.Frame(qt)); err != nil {
				t.Fatalf("round trip refused: %v", err)
			}
		}
	})
}
