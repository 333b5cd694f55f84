package cli_test

import (
	"bytes"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"trainwire.dev/lib/cli/clitest"
)

// TestProgressBarOnlyOnTerminal runs long verbs with stderr on a
// pseudo-terminal, where their bar is drawn, and on a pipe, where it never
// is (issue 24 item 15); stdout is a file either way.
func TestProgressBarOnlyOnTerminal(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	traces := filepath.Join(filepath.Dir(self), "..", "..", "tools", "profiler", "testdata", "ddp-gloo-4")
	cases := []struct {
		tool  string
		args  []string
		label string
	}{
		{"hashsync", []string{"gen", "--preset", "deepfm", "--steps", "3"}, "gen"},
		{"profiler", []string{"summary", traces}, "read"},
	}
	for _, c := range cases {
		bin := clitest.Binary(t, c.tool)
		t.Run(c.tool, func(t *testing.T) {
			onTTY := runOnPTY(t, bin, c.args)
			if !strings.Contains(onTTY, c.label) || !strings.Contains(onTTY, "100%") {
				t.Errorf("%s %v on a terminal: no bar in %q", c.tool, c.args, onTTY)
			}
			cmd := exec.Command(bin, c.args...)
			var errb bytes.Buffer
			cmd.Stdout, cmd.Stderr = io.Discard, &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("%v: %s", err, errb.String())
			}
			if strings.Contains(errb.String(), "100%") || strings.Contains(errb.String(), "\r") {
				t.Errorf("%s %v on a pipe drew a bar: %q", c.tool, c.args, errb.String())
			}
		})
	}
}

// runOnPTY runs bin with stderr on a pseudo-terminal and returns what it
// drew there.
func runOnPTY(t *testing.T, bin string, args []string) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = io.Discard, tty
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds its own copy
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(ptmx) // EIO once the child has exited
		got <- string(b)
	}()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	select {
	case s := <-got:
		return s
	case <-time.After(20 * time.Second):
		t.Fatal("reading the terminal hung")
	}
	return ""
}
