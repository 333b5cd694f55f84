package readmetest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"trainwire.dev/lib/cli/clitest"
)

// block is one ```sh block of the README.
type block struct {
	kind string // testdata/KIND.txtar, or "skip"
	line int    // of the opening fence
	text string
}

var (
	fence      = regexp.MustCompile("(?m)^```(\\w*)\n")
	annotation = regexp.MustCompile(`<!-- readme-test: (\S+)[^\n]*-->\n$`)
)

// readmeBlocks returns the README's sh blocks with their annotations; a
// block without one is an error (every block must say how it runs).
func readmeBlocks(readme string) ([]block, error) {
	var out []block
	locs := fence.FindAllStringSubmatchIndex(readme, -1)
	for i := 0; i+1 < len(locs); i += 2 {
		open, end := locs[i], locs[i+1]
		lang := readme[open[2]:open[3]]
		line := strings.Count(readme[:open[0]], "\n") + 1
		if lang != "sh" {
			continue
		}
		m := annotation.FindStringSubmatch(readme[:open[0]])
		if m == nil {
			return nil, fmt.Errorf("README.md:%d: a sh block without a <!-- readme-test: KIND --> line before it", line)
		}
		out = append(out, block{kind: m[1], line: line, text: readme[open[1]:end[0]]})
	}
	return out, nil
}

// runner runs block.sh as a user's shell would (bash, stopping at the
// first failing command), and stops what the block left running in the
// background (agents) when it ends.
const runner = `cleanup() {
  rc=$?; set +e
  pids=$(jobs -p); [ -z "$pids" ] || kill $pids 2>/dev/null; wait
  exit $rc
}
trap cleanup EXIT
set -e
source ./block.sh
`

// TestREADME runs every sh block of README.md through its testscript.
func TestREADME(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := readmeBlocks(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) < 2 {
		t.Fatalf("%d sh blocks in README.md", len(blocks))
	}
	binDir := ""
	for _, tool := range []string{"hashsync", "compressor", "fuser", "profiler", "ckpt", "straggle"} {
		binDir = filepath.Dir(clitest.Binary(t, tool))
	}
	for _, b := range blocks {
		if b.kind == "skip" {
			continue
		}
		t.Run(fmt.Sprintf("%s@line%d", b.kind, b.line), func(t *testing.T) {
			runBlock(t, root, binDir, b)
		})
	}
}

// runBlock runs one block: testdata/KIND.txtar with block.sh and
// readme.sh added, in a work directory where bin/, tools/ and examples/
// are the repository's (bin/ the tools under test).
func runBlock(t *testing.T, root, binDir string, b block) {
	script, err := os.ReadFile(filepath.Join("testdata", b.kind+".txtar"))
	if err != nil {
		t.Fatalf("README.md:%d: block of kind %q: %v", b.line, b.kind, err)
	}
	if b.kind == "launchers" && os.Getenv("TRAINWIRE_REQUIRE_PYTHON") == "1" {
		for _, cmd := range []string{"torchrun", "mpirun"} {
			if _, err := exec.LookPath(cmd); err != nil {
				t.Fatalf("%s: %v (make deps installs it)", cmd, err)
			}
		}
	}
	dir := t.TempDir()
	archive := string(script) + "\n-- block.sh --\n" + b.text + "-- readme.sh --\n" + runner
	if err := os.WriteFile(filepath.Join(dir, b.kind+".txtar"), []byte(archive), 0o644); err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: dir,
		Setup: func(env *testscript.Env) error {
			links := map[string]string{"bin": binDir, "tools": filepath.Join(root, "tools"), "examples": filepath.Join(root, "examples")}
			for name, target := range links {
				if err := os.Symlink(target, filepath.Join(env.WorkDir, name)); err != nil {
					return err
				}
			}
			home := filepath.Join(env.WorkDir, ".home")
			env.Setenv("HOME", home)
			// one run id: the ckpt agents' default sockets are then this
			// run's, not another test's
			env.Setenv("TRAINWIRE_RUN_ID", filepath.Base(env.WorkDir))
			return os.MkdirAll(home, 0o755)
		},
	})
}
