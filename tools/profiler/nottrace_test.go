package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
)

// TestNotATrace: a JSON file that holds no trace (a model, a config, an
// array of numbers) is bad input naming the file, not an empty trace
// reported as 0 events with exit 0. An empty trace is still a trace.
func TestNotATrace(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	model := write("model.json", `{"name": "resnet50", "grads": [{"name": "fc.weight", "bytes": 8192000}]}`)
	nums := write("nums.json", `[1, 2, 3]`)
	empty := write("empty.json", `{}`)
	for _, c := range []struct{ file, want string }{
		{model, `not a trace: a JSON object with no traceEvents array (its keys: "name", "grads")`},
		{nums, "not a trace: an array of 3 values, none of them an event object"},
		{empty, "not a trace: a JSON object with no traceEvents array (it is empty)"},
	} {
		for _, verb := range []string{"summary", "ingest", "model"} {
			code, _, errs := runCLI(t, nil, verb, c.file)
			assert.Equal(t, cli.ExitBadInput, code, "%s %s: %s", verb, c.file, errs)
			assert.Contains(t, errs, c.file+": "+c.want, verb)
		}
	}
	code, _, errs := runCLI(t, nil, "summary", "--no-frames", write("none.json", `{"traceEvents": []}`))
	assert.Equal(t, 0, code, errs)
	assert.False(t, strings.Contains(errs, "not a trace"))
}
