package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/hashsync/internal/place"
)

func runPlace(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(append([]string{"place"}, args...), bytes.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

const placeTables = "a:1000:16:100,b:4000:16:46,c:9000:16:30,d:12000:16:6,e:3000:16:12"

// TestPlaceFramesCheckJSON: a plan from flags is a plan frame that
// --check accepts; the json form has every shard and the baselines.
func TestPlaceFramesCheckJSON(t *testing.T) {
	code, out, stderr := runPlace(t, nil, "--ranks", "4", "--capacity", "1MiB", "--table", placeTables, "--format", "frames")
	require.Equal(t, 0, code, stderr)
	f, err := wire.NewReader(strings.NewReader(out), wire.Limits{}).Next()
	require.NoError(t, err)
	pf := f.(*wire.Plan)
	assert.Equal(t, place.Kind, pf.Kind)
	assert.Contains(t, pf.Meta, "baseline.round-robin")
	p, tables, err := place.FromFrame(pf)
	require.NoError(t, err)
	assert.Len(t, tables, 5)
	assert.Greater(t, len(p.Shards), 5, "the hot table a is cut row-wise")

	path := filepath.Join(t.TempDir(), "plan.tw")
	require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
	code, out, stderr = runPlace(t, nil, "--check", path, "--format", "json")
	require.Equal(t, 0, code, stderr)
	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	assert.Equal(t, "sven", js["algo"])
	assert.Len(t, js["shards"], len(p.Shards))

	code, out, stderr = runPlace(t, nil, "--ranks", "4", "--capacity", "1MiB", "--table", placeTables, "--format", "table")
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, out, "round-robin")
	assert.Contains(t, out, "size-greedy")
}

// TestPlaceFromIndexStream: tables and their access histograms measured
// from `hashsync gen`'s Zipf lookups: the hot rows are at the start of
// each table, so Sven's row-wise cuts of a hot table are uneven in rows
// but even in load.
func TestPlaceFromIndexStream(t *testing.T) {
	var gen bytes.Buffer
	var errb bytes.Buffer
	require.Equal(t, 0, run([]string{"gen", "--preset", "deepfm", "--rows", "20000", "--width", "8", "--steps", "4", "--tensors", "3"}, nil, &gen, &errb), errb.String())
	path := filepath.Join(t.TempDir(), "idx.tw")
	require.NoError(t, os.WriteFile(path, gen.Bytes(), 0o644))
	code, out, stderr := runPlace(t, nil, "--ranks", "4", "--indices", path, "--format", "frames")
	require.Equal(t, 0, code, stderr)
	f, err := wire.NewReader(strings.NewReader(out), wire.Limits{}).Next()
	require.NoError(t, err)
	p, tables, err := place.FromFrame(f.(*wire.Plan))
	require.NoError(t, err)
	require.Len(t, tables, 3)
	for _, tb := range tables {
		assert.Equal(t, int64(20000), tb.Rows)
		assert.Equal(t, int64(8), tb.Dim)
		assert.Greater(t, tb.Load, 0.0)
	}
	s := p.Summary()
	assert.Less(t, s.Imbalance, 1.05, "3 equally hot tables on 4 ranks: cut row-wise to balance")
	for _, sh := range p.Shards {
		if sh.RowLo == 0 && sh.RowHi < 20000 {
			assert.Less(t, sh.RowHi, int64(20000/4), "the first cut of a Zipf table is among its hot rows")
		}
	}
}

// TestPlaceRefuses: infeasible placements, bad flags and bad plans are
// refused with the reason and the right exit code.
func TestPlaceRefuses(t *testing.T) {
	code, _, stderr := runPlace(t, nil, "--ranks", "2", "--capacity", "100KiB", "--table", placeTables)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "place: sven: no plan: place: sven: tables need 1856000 bytes, the ranks hold 204800")
	code, _, stderr = runPlace(t, nil, "--ranks", "2", "--table", "a:10")
	assert.Equal(t, 80, code)
	assert.Contains(t, stderr, `--table "a:10": want NAME:ROWS:DIM[:LOAD]`)
	code, _, stderr = runPlace(t, nil, "--ranks", "2", "--table", "a:10:4,a:3:4")
	assert.Equal(t, 80, code)
	assert.Contains(t, stderr, `table "a" given twice`)
	code, _, stderr = runPlace(t, nil, "--table", "a:10:4")
	assert.Equal(t, 80, code)
	assert.Contains(t, stderr, "--ranks (TRAINWIRE_WORLD) must be at least 1")

	// a plan whose table is on no rank, and one over a capacity
	tables := []place.Table{{Name: "a", Rows: 4, Dim: 2, ElemBytes: 4, Load: 1}, {Name: "b", Rows: 2, Dim: 2, ElemBytes: 4, Load: 1}}
	p := &place.Plan{Algo: "hand", Capacity: []int64{64, 64}, Shards: []place.Shard{{Table: "a", RowHi: 4, Bytes: 32, Rank: 0}}}
	dir := t.TempDir()
	for name, pl := range map[string]*place.Plan{"nowhere": p, "over": {Algo: "hand", Capacity: []int64{40, 64},
		Shards: []place.Shard{{Table: "a", RowHi: 4, Bytes: 32, Rank: 0}, {Table: "b", RowHi: 2, Bytes: 16, Rank: 0}}}} {
		var buf bytes.Buffer
		w := wire.NewWriter(&buf, "test")
		require.NoError(t, w.Write(pl.Frame(tables)))
		require.NoError(t, w.Close())
		path := filepath.Join(dir, name+".tw")
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		code, out, stderr := runPlace(t, nil, "--check", path)
		assert.Equal(t, 2, code, name)
		assert.Empty(t, out, name)
		want := map[string]string{"nowhere": `refused: place: table "b" is on no rank`, "over": "refused: place: rank 0 holds 48 bytes, over its capacity of 40"}[name]
		assert.Contains(t, stderr, want, name)
	}
}

// TestPlaceEnv: the flags a launcher sets come from the environment.
func TestPlaceEnv(t *testing.T) {
	t.Setenv("TRAINWIRE_WORLD", "3")
	t.Setenv("TRAINWIRE_HASHSYNC_TABLE", placeTables)
	t.Setenv("TRAINWIRE_HASHSYNC_ALGO", "size-greedy")
	code, out, stderr := runPlace(t, nil, "--format", "json")
	require.Equal(t, 0, code, stderr)
	var js map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &js))
	assert.Equal(t, "size-greedy", js["algo"])
	assert.Equal(t, float64(3), js["ranks"])
}
