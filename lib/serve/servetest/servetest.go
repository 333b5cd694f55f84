// Package servetest starts serve sidecars as real processes for tests:
// one per rank under torchrun's variables, each with a Go client and a
// shared-memory segment attached.
package servetest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/shm"
)

// Sidecars are a tool's serve ranks and a Go client per rank, each with
// a segment attached as segment 0.
type Sidecars struct {
	Procs   []*clitest.Proc
	Clients []*serve.Client
	Segs    []*shm.Segment
	// Sockets are the ranks' socket paths.
	Sockets []string
}

// TorchrunEnv is the variable set torchrun gives rank r of world ranks on
// one node, with the sidecar's socket and a job token.
func TorchrunEnv(r, world, port int, socket string) []string {
	return []string{
		fmt.Sprintf("RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", world), fmt.Sprintf("LOCAL_RANK=%d", r),
		fmt.Sprintf("LOCAL_WORLD_SIZE=%d", world), "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "ROLE_RANK=" + fmt.Sprint(r),
		"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port), "TORCHELASTIC_RUN_ID=serve-e2e",
		"TRAINWIRE_SERVE_SOCKET=" + socket, "TRAINWIRE_TOKEN=serve-e2e",
	}
}

// Start starts world `TOOL serve ARGS…` processes under torchrun's
// variables (bin/TOOL, built by clitest.Binary), connects a client to each
// and attaches a segment of segBytes. extra(r), when not nil, adds rank
// r's own flags.
func Start(t testing.TB, ctx context.Context, tool string, world, segBytes int, extra func(r int) []string, args ...string) *Sidecars {
	t.Helper()
	bin := clitest.Binary(t, tool)
	dir := t.TempDir()
	port := clitest.FreeLauncherPort(t)
	sc := &Sidecars{}
	for r := range world {
		sock := filepath.Join(dir, fmt.Sprintf("r%d.sock", r))
		a := append([]string{"serve"}, args...)
		if extra != nil {
			a = append(a, extra(r)...)
		}
		sc.Procs = append(sc.Procs, clitest.Start(t, ctx, bin, TorchrunEnv(r, world, port, sock), nil, a...))
		sc.Sockets = append(sc.Sockets, sock)
	}
	for r := range world {
		sc.Connect(t, ctx, r, segBytes)
	}
	return sc
}

// Connect dials rank r's socket once it exists and attaches a segment of
// segBytes as segment 0.
func (sc *Sidecars) Connect(t testing.TB, ctx context.Context, r, segBytes int) {
	t.Helper()
	var c *serve.Client
	for {
		var err error
		if c, err = serve.Dial(sc.Sockets[r]); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rank %d: no socket at %s: %v; stderr: %s", r, sc.Sockets[r], err, sc.Procs[r].Stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Cleanup(func() { c.Close() })
	seg, err := shm.Create(fmt.Sprintf("rank%d", r), int64(segBytes), true)
	if err != nil {
		t.Fatalf("rank %d: segment: %v", r, err)
	}
	t.Cleanup(func() { seg.Close() })
	if _, err := c.Attach(seg, 0); err != nil {
		t.Fatalf("rank %d: attach: %v", r, err)
	}
	sc.Clients = append(sc.Clients, c)
	sc.Segs = append(sc.Segs, seg)
}
