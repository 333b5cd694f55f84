package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
)

// readingStdin: a thread of pid is in read(0, …), i.e. the verb waits for
// input (the state Ctrl-C used to be ignored in).
func readingStdin(pid int) bool {
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "syscall"))
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err == nil && strings.HasPrefix(string(b), "0 0x0 ") {
			return true
		}
	}
	return false
}

// Every verb stops on SIGINT (130) or SIGTERM (143) while it waits on
// stdin, writes output or waits in the rendezvous: it does not ignore the
// signal, finish its job and exit 0, or exit 3 as if a peer had failed;
// and what it wrote is no complete stream (no end frame).
func TestSignalsStopEveryVerb(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("needs /proc")
	}
	costs := []string{"--comm-alpha-us", "1", "--comm-gbps", "1", "--comp-alpha-us", "1", "--comp-gbps", "1"}
	cases := []struct {
		name  string
		tool  string
		args  []string
		ready string // stdin: waits in read(0); stdout: has written; stderr:TEXT: logged TEXT
		sig   syscall.Signal
		want  int
	}{
		{"hashsync dump", "hashsync", []string{"dump"}, "stdin", syscall.SIGINT, 130},
		{"profiler summary -", "profiler", []string{"summary", "-"}, "stdin", syscall.SIGINT, 130},
		{"compressor decode", "compressor", []string{"decode"}, "stdin", syscall.SIGTERM, 143},
		{"fuser plan", "fuser", append([]string{"plan", "--format", "frames"}, costs...), "stdin", syscall.SIGINT, 130},
		{"straggle sync", "straggle", []string{"sync", "--world", "1"}, "stdin", syscall.SIGINT, 130},
		{"hashsync gen", "hashsync", []string{"gen", "--preset", "deepfm", "--steps", "100000"}, "stdout", syscall.SIGINT, 130},
		{"hashsync sync in rendezvous", "hashsync", []string{"sync", "--rank", "1", "--world", "2", "--master", "127.0.0.1:1", "--log-level", "debug"},
			"stderr:rendezvous", syscall.SIGINT, 130},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			out, err := os.Create(filepath.Join(dir, "out"))
			require.NoError(t, err)
			defer out.Close()
			pr, pw, err := os.Pipe() // stdin that stays open: no EOF comes
			require.NoError(t, err)
			defer pw.Close()
			cmd := exec.Command(clitest.Binary(t, c.tool), c.args...)
			var stderr clitest.Buffer
			cmd.Stdin, cmd.Stdout, cmd.Stderr = pr, out, &stderr
			require.NoError(t, cmd.Start())
			pr.Close()
			defer cmd.Process.Kill()
			waitUntil(t, c.name, func() bool {
				switch {
				case c.ready == "stdin":
					return readingStdin(cmd.Process.Pid)
				case c.ready == "stdout":
					st, err := out.Stat()
					return err == nil && st.Size() > 0
				default:
					return strings.Contains(stderr.String(), strings.TrimPrefix(c.ready, "stderr:"))
				}
			})
			require.NoError(t, cmd.Process.Signal(c.sig))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				assert.Equal(t, c.want, clitest.ExitCode(err), "stderr: %s", stderr.String())
			case <-time.After(30 * time.Second):
				t.Fatalf("%s did not stop on %v; stderr: %s", c.name, c.sig, stderr.String())
			}
			b, err := os.ReadFile(out.Name())
			require.NoError(t, err)
			if len(b) > 0 { // a partial stream: the dump of it fails
				dump := exec.Command(clitest.Binary(t, "hashsync"), "dump", out.Name())
				assert.Equal(t, 2, clitest.ExitCode(dump.Run()), "%s's output reads as a complete stream", c.name)
			}
		})
	}
}

// waitUntil polls ok until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Empty stdin is a malformed stream (no header) for every verb that reads
// one: exit 2 everywhere (compressor said 1), and a message that says so.
func TestEmptyStdinExits2(t *testing.T) {
	costs := []string{"--comm-alpha-us", "1", "--comm-gbps", "1", "--comp-alpha-us", "1", "--comp-gbps", "1", "--format", "frames"}
	for _, c := range []struct {
		tool string
		args []string
	}{
		{"hashsync", []string{"dump"}},
		{"compressor", []string{"encode", "--algo", "topk"}},
		{"compressor", []string{"decode"}},
		{"compressor", []string{"sum"}},
		{"fuser", append([]string{"plan"}, costs...)},
		{"profiler", []string{"summary", "-"}},
		{"straggle", []string{"sync", "--world", "1"}},
	} {
		cmd := exec.Command(clitest.Binary(t, c.tool), c.args...)
		var stderr clitest.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		assert.Equal(t, 2, clitest.ExitCode(err), "%s %v: %s", c.tool, c.args, stderr.String())
		assert.Regexp(t, `empty input|no value`, stderr.String(), "%s %v", c.tool, c.args)
	}
}
