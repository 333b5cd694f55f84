package cli

import (
	"bytes"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

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

type stopCLI struct {
	Globals
	Serve struct{} `cmd:"" help:"Serve until a signal."`
}

// Run waits for the signal, then returns nil: a daemon that stopped
// cleanly.
func (c *stopCLI) Run(rio *IO) error {
	<-rio.Ctx.Done()
	return nil
}

// TestSignalStopsWithItsCode: a verb that returns nil after SIGINT or
// SIGTERM stopped it still exits 130 or 143, as every verb does on a
// signal (the ckpt agent exited 0).
func TestSignalStopsWithItsCode(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		want int
	}{{syscall.SIGINT, ExitInterrupted}, {syscall.SIGTERM, ExitTerminated}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			// The test's own handler: no signal can kill the test, whether
			// Run's handler is in place yet or already gone.
			guard := make(chan os.Signal, 16)
			signal.Notify(guard, c.sig)
			defer signal.Stop(guard)
			var out, errb bytes.Buffer
			done := make(chan int, 1)
			go func() {
				done <- Run(Tool{Name: "tw"}, &stopCLI{}, []string{"serve"}, strings.NewReader(""), &out, &errb)
			}()
			deadline := time.After(10 * time.Second)
			for { // signal until Run's handler has taken one
				require.NoError(t, syscall.Kill(os.Getpid(), c.sig))
				select {
				case code := <-done:
					require.Equal(t, c.want, code, errb.String())
					return
				case <-time.After(50 * time.Millisecond):
				case <-deadline:
					t.Fatal("Run did not return after the signal")
				}
			}
		})
	}
}
