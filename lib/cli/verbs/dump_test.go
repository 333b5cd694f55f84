package verbs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
)

type dumpCLI struct {
	cli.Globals
	Dump DumpCmd `cmd:""`
}

func TestDump(t *testing.T) {
	in := clitest.Stream(t,
		&wire.Dense{Name: "w", Rank: 1, DType: wire.F32, Shape: []int64{2}, Data: []byte{0, 0, 0x80, 0x3f, 0, 0, 0xc0, 0x7f}},
		&wire.Stats{Tool: "x", Name: "n", Rank: -1, Values: map[string]float64{"a": 1}})
	var out, errb bytes.Buffer
	code := cli.Run(cli.Tool{Name: "t"}, &dumpCLI{}, []string{"dump", "--values", "2"}, bytes.NewReader(in), &out, &errb)
	require.Equal(t, cli.ExitOK, code, errb.String())
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
	in := clitest.Stream(t, &wire.Dense{Name: "w", Rank: 1, DType: wire.U8, Shape: []int64{3}, Data: []byte{1, 2, 3}})
	var out, errb bytes.Buffer
	code := cli.Run(cli.Tool{Name: "t"}, &dumpCLI{}, []string{"dump"}, bytes.NewReader(in[:len(in)-5]), &out, &errb)
	assert.Equal(t, cli.ExitBadInput, code)
	assert.Contains(t, errb.String(), "truncated")
	assert.Contains(t, errb.String(), "frame 2")
	// What was read before the damage is still printed.
	assert.Contains(t, out.String(), `"t":"dense"`)
}

func TestDumpMissingFile(t *testing.T) {
	var out, errb bytes.Buffer
	code := cli.Run(cli.Tool{Name: "t"}, &dumpCLI{}, []string{"dump", "/nonexistent/x.tw"}, nil, &out, &errb)
	assert.Equal(t, cli.ExitFailure, code)
	assert.Contains(t, errb.String(), "/nonexistent/x.tw")
}

func TestDumpHalfValues(t *testing.T) {
	in := clitest.Stream(t, &wire.Dense{Name: "h", Rank: -1, DType: wire.F16, Shape: []int64{3}, Data: []byte{0x00, 0x3c, 0x00, 0xc0, 0x00, 0x7c}})
	var out, errb bytes.Buffer
	require.Equal(t, cli.ExitOK, cli.Run(cli.Tool{Name: "t"}, &dumpCLI{}, []string{"dump", "--values", "3"}, bytes.NewReader(in), &out, &errb), errb.String())
	assert.Contains(t, out.String(), `"values":[1,-2,"+Inf"]`)
}
