package clitest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildMu sync.Mutex
	built   = map[string]string{}
)

// Binary returns the path of a built trainwire tool: $TRAINWIRE_BIN/<name>
// when that exists (make test builds bin/ first), else a fresh `go build`
// of trainwire.dev/tools/<name> into a temporary directory, once per test
// process.
func Binary(t testing.TB, name string) string {
	t.Helper()
	return build(t, name, name, "")
}

// BinaryTags is Binary for a build with tags (e.g. "cuda" or "cudaemu"):
// $TRAINWIRE_BIN/<name>-<tags> when that exists (on a GPU machine, which
// has no Go, bench/gpu/build.sh puts bin/hashsync-cuda there), else `go
// build -tags tags`.
func BinaryTags(t testing.TB, name, tags string) string {
	t.Helper()
	return build(t, name, name+"-"+tags, tags)
}

func build(t testing.TB, tool, file, tags string) string {
	t.Helper()
	if dir := os.Getenv("TRAINWIRE_BIN"); dir != "" {
		p := filepath.Join(dir, file)
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[file]; ok {
		return p
	}
	dir, err := os.MkdirTemp("", "trainwire-bin-")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, file)
	args := []string{"build", "-o", p}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	out, err := exec.Command("go", append(args, "trainwire.dev/tools/"+tool)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go build %s: %v\n%s", file, err, out)
	}
	built[file] = p
	return p
}
