package cli_test

import (
	"bytes"
	"io"
	"os"
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
	// A multi-step sync reads a stream of 3 steps from a file.
	grads := filepath.Join(t.TempDir(), "grads.tw")
	gf, err := os.Create(grads)
	if err != nil {
		t.Fatal(err)
	}
	gen := exec.Command(clitest.Binary(t, "hashsync"), "gen", "--preset", "deepfm", "--steps", "3")
	var generr bytes.Buffer
	gen.Stdout, gen.Stderr = gf, &generr
	if err := gen.Run(); err != nil {
		t.Fatalf("gen: %v: %s", err, generr.String())
	}
	gf.Close()
	cases := []struct {
		name  string
		tool  string
		args  []string
		stdin string
		label string
	}{
		{"gen", "hashsync", []string{"gen", "--preset", "deepfm", "--steps", "3"}, "", "gen"},
		{"sync", "hashsync", []string{"sync", "--rank", "0", "--world", "1"}, grads, "sync"},
		{"summary", "profiler", []string{"summary", traces}, "", "read"},
	}
	for _, c := range cases {
		bin := clitest.Binary(t, c.tool)
		t.Run(c.name, func(t *testing.T) {
			onTTY := runOnPTY(t, bin, c.args, c.stdin)
			if !strings.Contains(onTTY, c.label) || !strings.Contains(onTTY, "100%") {
				t.Errorf("%s %v on a terminal: no bar in %q", c.tool, c.args, onTTY)
			}
			cmd := exec.Command(bin, c.args...)
			cmd.Stdin = open(t, c.stdin)
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
func runOnPTY(t *testing.T, bin string, args []string, stdin string) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdin = open(t, stdin)
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

// open opens the file a case reads on stdin (nil, /dev/null, for none).
func open(t *testing.T, path string) *os.File {
	t.Helper()
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
