package clitest

import (
	"fmt"
	"net"
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

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// FreeLauncherPort returns a port P on 127.0.0.1 such that P and P+1 were
// both free a moment ago: a launcher's MASTER_PORT (torchrun's TCPStore
// takes P, trainwire's rendezvous P+1, see lib/launch).
func FreeLauncherPort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p < 65535 {
			if l2, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+1)); err == nil {
				l2.Close()
				l.Close()
				return p
			}
		}
		l.Close()
	}
	t.Fatal("no free pair of consecutive ports on 127.0.0.1")
	return 0
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1: it holds every
// listener open until all n are chosen, so the kernel cannot hand out the
// same port twice (n FreePort calls can).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports
}
