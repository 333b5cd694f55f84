package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type usageCLI struct {
	Globals
	Gen struct {
		Preset string `help:"Workload preset." default:"none"`
	} `cmd:"" help:"Generate."`
}

func (c *usageCLI) Run(*IO) error { return nil }

// TestUsageToStderr: a bad flag prints the error and the usage on stderr,
// never on stdout, which may be the next tool's input
// (`hashsync gen --presett deepfm | compressor encode` fed compressor the
// usage text); --help, asked for, still prints on stdout.
func TestUsageToStderr(t *testing.T) {
	tool := Tool{Name: "tw", Description: "test tool"}
	var out, errb bytes.Buffer
	code := Run(tool, &usageCLI{}, []string{"gen", "--presett", "deepfm"}, strings.NewReader(""), &out, &errb)
	require.Equal(t, ExitUsage, code)
	require.Empty(t, out.String(), "usage went to stdout")
	require.Contains(t, errb.String(), "--presett")
	require.Contains(t, errb.String(), "Usage: tw gen")

	out.Reset()
	errb.Reset()
	require.Equal(t, ExitOK, Run(tool, &usageCLI{}, []string{"gen", "--help"}, strings.NewReader(""), &out, &errb))
	require.Contains(t, out.String(), "Usage: tw gen")
}
