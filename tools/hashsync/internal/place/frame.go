package place

import (
	"fmt"
	"math"

	"trainwire.dev/lib/wire"
)

// Kind is the plan frame's kind for embedding placements (docs/sven.md).
const Kind = "embedding"

// MaxShards bounds the shards and tables a plan frame may hold.
const MaxShards = 1 << 20

// Frame is the plan as a `plan` frame: one item per shard {table, rank,
// row_lo, row_hi, bytes, load}; meta holds the tables {name, rows, dim,
// elem_bytes, load}, the capacity per rank and the summary, so the frame
// is checked and used on its own.
func (p *Plan) Frame(tables []Table) *wire.Plan {
	items := make([]map[string]any, len(p.Shards))
	for i, s := range p.Shards {
		items[i] = map[string]any{"table": s.Table, "rank": int64(s.Rank), "row_lo": s.RowLo, "row_hi": s.RowHi, "bytes": s.Bytes, "load": s.Load}
	}
	ts := make([]any, len(tables))
	for i, t := range tables {
		ts[i] = map[string]any{"name": t.Name, "rows": t.Rows, "dim": t.Dim, "elem_bytes": t.ElemBytes, "load": t.Load}
	}
	capacity := make([]any, len(p.Capacity))
	for r, c := range p.Capacity {
		capacity[r] = c
	}
	s := p.Summary()
	return &wire.Plan{Kind: Kind, Algo: p.Algo, Items: items, Meta: map[string]any{
		"ranks": int64(p.Ranks()), "capacity": capacity, "tables": ts,
		"max_bytes": s.MaxBytes, "mean_bytes": s.MeanBytes, "max_load": s.MaxLoad, "mean_load": s.MeanLoad,
	}}
}

// FromFrame reads an embedding placement plan frame back, and checks it
// (Check): every error names the item or table and the field.
func FromFrame(f *wire.Plan) (*Plan, []Table, error) {
	if f.Kind != Kind {
		return nil, nil, fmt.Errorf("place: plan of kind %q, want %q", f.Kind, Kind)
	}
	capacity, err := capacityOf(f.Meta)
	if err != nil {
		return nil, nil, err
	}
	tables, err := tablesOf(f.Meta)
	if err != nil {
		return nil, nil, err
	}
	if len(f.Items) > MaxShards {
		return nil, nil, fmt.Errorf("place: plan has %d shards, more than %d", len(f.Items), MaxShards)
	}
	p := &Plan{Algo: f.Algo, Capacity: capacity}
	for i, it := range f.Items {
		s, err := shardOf(it)
		if err != nil {
			return nil, nil, fmt.Errorf("place: plan item %d: %w", i, err)
		}
		p.Shards = append(p.Shards, s)
	}
	if err := CheckTables(tables); err != nil {
		return nil, nil, err
	}
	if err := p.Check(tables); err != nil {
		return nil, nil, err
	}
	return p, tables, nil
}

func capacityOf(meta map[string]any) ([]int64, error) {
	raw, ok := meta["capacity"].([]any)
	if !ok {
		return nil, fmt.Errorf("place: plan meta: field \"capacity\" is %T, want an array of ints", meta["capacity"])
	}
	if len(raw) > MaxShards {
		return nil, fmt.Errorf("place: plan meta: %d ranks", len(raw))
	}
	out := make([]int64, len(raw))
	for r, v := range raw {
		c, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("place: plan meta: capacity of rank %d is %T, want an int", r, v)
		}
		out[r] = c
	}
	if n, ok := meta["ranks"].(int64); !ok || n != int64(len(out)) {
		return nil, fmt.Errorf("place: plan meta: field \"ranks\" is %v, want %d (the capacities)", meta["ranks"], len(out))
	}
	return out, CheckCapacity(out)
}

func tablesOf(meta map[string]any) ([]Table, error) {
	raw, ok := meta["tables"].([]any)
	if !ok {
		return nil, fmt.Errorf("place: plan meta: field \"tables\" is %T, want an array of maps", meta["tables"])
	}
	if len(raw) > MaxShards {
		return nil, fmt.Errorf("place: plan meta: %d tables", len(raw))
	}
	out := make([]Table, len(raw))
	for i, v := range raw {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("place: plan meta: table %d is %T, want a map", i, v)
		}
		f := fields{m: m, where: fmt.Sprintf("plan meta: table %d", i)}
		out[i] = Table{Name: f.str("name"), Rows: f.int("rows"), Dim: f.int("dim"), ElemBytes: f.int("elem_bytes"), Load: f.float("load")}
		if f.err != nil {
			return nil, f.err
		}
	}
	return out, nil
}

func shardOf(m map[string]any) (Shard, error) {
	f := fields{m: m}
	s := Shard{Table: f.str("table"), RowLo: f.int("row_lo"), RowHi: f.int("row_hi"), Bytes: f.int("bytes"), Load: f.float("load")}
	rank := f.int("rank")
	if f.err != nil {
		return s, f.err
	}
	if rank < 0 || rank > math.MaxInt32 {
		return s, fmt.Errorf("field \"rank\" is %d", rank)
	}
	s.Rank = int(rank)
	return s, nil
}

// fields reads typed fields of a free-form map, keeping the first error.
type fields struct {
	m     map[string]any
	where string
	err   error
}

func (f *fields) fail(k string, v any, want string) {
	if f.err == nil {
		msg := fmt.Sprintf("field %q is %T, want %s", k, v, want)
		if f.where != "" {
			msg = "place: " + f.where + ": " + msg
		}
		f.err = fmt.Errorf("%s", msg)
	}
}

func (f *fields) str(k string) string {
	s, ok := f.m[k].(string)
	if !ok {
		f.fail(k, f.m[k], "a string")
	}
	return s
}

func (f *fields) int(k string) int64 {
	i, ok := f.m[k].(int64)
	if !ok {
		f.fail(k, f.m[k], "an int")
	}
	return i
}

func (f *fields) float(k string) float64 {
	switch v := f.m[k].(type) {
	case float64:
		return v
	case int64:
		return float64(v)
	}
	f.fail(k, f.m[k], "a number")
	return 0
}
