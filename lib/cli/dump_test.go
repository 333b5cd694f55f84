package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

type dumpCLI struct {
	Globals
	Dump DumpCmd `cmd:""`
}

func stream(t *testing.T, frames ...wire.Frame) []byte {
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	for _, f := range frames {
		require.NoError(t, w.Write(f))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

func TestDump(t *testing.T) {
	in := stream(t,
		&wire.Dense{Name: "w", Rank: 1, DType: wire.F32, Shape: []int64{2}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0x7f}},
		&wire.Stats{Tool: "x", Name: "n", Rank: -1, Values: map[string]float64{"a": 1}})
	var out, errb bytes.Buffer
	code := Run(Tool{Name: "t"}, &dumpCLI{}, []string{"dump", "--values", "2"}, bytes.NewReader(in), &out, &errb)
	require.Equal(t, ExitOK, code, errb.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Len(t, lines, 4)
	var dense map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &dense))
	assert.Equal(t, "dense", dense["t"])
	assert.Equal(t, "w", dense["name"])
	data := dense["data"].(map[string]any)
	assert.Equal(t, float64(8), data["bytes"])
	assert.Equal(t, []any{1.0, "NaN"}, data["values"])
	assert.Contains(t, lines[3], `"t":"end"`)
	assert.Contains(t, lines[3], `"count":2`)
}

func TestDumpTruncatedExits2(t *testing.T) {
	in := stream(t, &wire.Dense{Name: "w", Rank: 1, DType: wire.U8, Shape: []int64{3}, Data: []byte{1, 2, 3}})
	var out, errb bytes.Buffer
	code := Run(Tool{Name: "t"}, &dumpCLI{}, []string{"dump"}, bytes.NewReader(in[:len(in)-5]), &out, &errb)
	assert.Equal(t, ExitBadInput, code)
	assert.Contains(t, errb.String(), "truncated")
	assert.Contains(t, errb.String(), "frame 2")
	// What was read before the damage is still printed.
	assert.Contains(t, out.String(), `"t":"dense"`)
}

func TestDumpMissingFile(t *testing.T) {
	var out, errb bytes.Buffer
	code := Run(Tool{Name: "t"}, &dumpCLI{}, []string{"dump", "/nonexistent/x.tw"}, nil, &out, &errb)
	assert.Equal(t, ExitFailure, code)
	assert.Contains(t, errb.String(), "/nonexistent/x.tw")
}

func TestParseByteSize(t *testing.T) {
	for s, want := range map[string]int64{"4096": 4096, "64KB": 64000, "1MiB": 1 << 20, "1M": 1 << 20,
		"2G": 2 << 30, "1.5KiB": 1536, "0": 0, "7B": 7, " 3 mib ": 3 << 20} {
		got, err := parseByteSize(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "-1", "abc", "1.3B", "1e30", "MB"} {
		_, err := parseByteSize(s)
		assert.Error(t, err, s)
	}
}

func TestDumpHalfValues(t *testing.T) {
	in := stream(t, &wire.Dense{Name: "h", Rank: -1, DType: wire.F16, Shape: []int64{3}, Data: []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c}})
	var out, errb bytes.Buffer
	require.Equal(t, ExitOK, Run(Tool{Name: "t"}, &dumpCLI{}, []string{"dump", "--values", "3"}, bytes.NewReader(in), &out, &errb), errb.String())
	assert.Contains(t, out.String(), `"values":[1,-2,"+Inf"]`)
}
