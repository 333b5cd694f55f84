package cli_test

import (
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

// TestFormatAutoOnTerminal: the planners' --format auto is a table on a
// terminal and frames on a pipe, by one rule (cli.ResolveFormat). Both
// tested *os.File, which stdout on a terminal is not once Run guards it,
// so auto chose frames and the guard refused them: exit 80 on a terminal.
func TestFormatAutoOnTerminal(t *testing.T) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	fuser := []string{"plan", "--model", filepath.Join(root, "tools", "fuser", "testdata", "g1.json"),
		"--comm-alpha-us", "500", "--comm-gbps", "4", "--comp-alpha-us", "1000", "--comp-gbps", "20"}
	plan := filepath.Join(root, "tools", "compressor", "testdata", "plan")
	compressor := []string{"plan", "--cpu-job", "--algo", "topk", "--model", filepath.Join(root, "tools", "fuser", "testdata", "g1.json"),
		"--cluster", filepath.Join(plan, "pcie-8x8-25g.json"), "--samples", filepath.Join(plan, "bench-cpu.tw")}
	for _, c := range []struct {
		tool, want string
		args       []string
	}{{"fuser", "predicted iteration", fuser}, {"compressor", "codec topk", compressor}} {
		bin := clitest.Binary(t, c.tool)
		ptmx, tty, err := pty.Open()
		if err != nil {
			t.Skipf("no pseudo-terminal: %v", err)
		}
		cmd := exec.Command(bin, c.args...)
		var errb strings.Builder
		cmd.Stdout, cmd.Stderr = tty, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		tty.Close()
		got := make(chan string, 1)
		go func() { b, _ := io.ReadAll(ptmx); got <- string(b) }()
		werr := cmd.Wait()
		var out string
		select {
		case out = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("reading the terminal hung")
		}
		ptmx.Close()
		if werr != nil || !strings.Contains(out, c.want) {
			t.Errorf("%s %v on a terminal: %v, stdout %q, stderr %s", c.tool, c.args, werr, out, errb.String())
		}
		piped, err := exec.Command(bin, c.args...).Output()
		if err != nil || len(piped) == 0 || piped[0]&0xf0 != 0x80 {
			t.Errorf("%s on a pipe: %v, want a stream (frames), got %q", c.tool, err, piped[:min(len(piped), 40)])
		}
	}
}
