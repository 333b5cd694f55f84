// Package meshtest opens in-process meshes on loopback for tests: N ranks
// as goroutines of one process, each with its own *mesh.Mesh and real
// sockets.
package meshtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"sync"
	"testing"
	"time"

	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
)

// Config returns the per-rank configurations of a world-rank job on
// loopback whose rank 0 rendezvous listener is ln: short timeouts, a
// random run id. Tests adjust them before calling Open.
func Config(world int, ln net.Listener) []mesh.Config {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	run := "test-" + hex.EncodeToString(rnd[:])
	port := ln.Addr().(*net.TCPAddr).Port
	cfgs := make([]mesh.Config, world)
	for r := range world {
		cfgs[r] = mesh.Config{
			Env:            launch.Env{Rank: r, World: world, LocalRank: r, LocalWorld: world, NumNodes: 1, MasterAddr: "127.0.0.1", MasterPort: port, RunID: run, Source: "flags"},
			Timeout:        20 * time.Second,
			ConnectTimeout: 30 * time.Second,
		}
	}
	cfgs[0].Listener = ln
	return cfgs
}

// Listen returns a loopback listener for rank 0's rendezvous.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// OpenAll opens every configuration concurrently and returns the meshes
// and errors, by rank.
func OpenAll(ctx context.Context, cfgs []mesh.Config) ([]*mesh.Mesh, []error) {
	ms := make([]*mesh.Mesh, len(cfgs))
	errs := make([]error, len(cfgs))
	var wg sync.WaitGroup
	for r := range cfgs {
		wg.Go(func() { ms[r], errs[r] = mesh.Open(ctx, cfgs[r]) })
	}
	wg.Wait()
	return ms, errs
}

// Open opens a world-rank mesh on loopback, failing the test on error, and
// closes it when the test ends. modify, if not nil, adjusts each rank's
// configuration first.
func Open(t testing.TB, world int, modify func(*mesh.Config)) []*mesh.Mesh {
	t.Helper()
	cfgs := Config(world, Listen(t))
	if modify != nil {
		for r := range cfgs {
			modify(&cfgs[r])
		}
	}
	ms, errs := OpenAll(context.Background(), cfgs)
	for r, err := range errs {
		if err != nil {
			for _, m := range ms {
				if m != nil {
					_ = m.Close()
				}
			}
			t.Fatalf("rank %d: open: %v", r, err)
		}
	}
	t.Cleanup(func() { CloseAll(ms) })
	return ms
}

// CloseAll closes the meshes concurrently, as ranks finishing a job do.
func CloseAll(ms []*mesh.Mesh) []error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for r, m := range ms {
		if m != nil {
			wg.Go(func() { errs[r] = m.Close() })
		}
	}
	wg.Wait()
	return errs
}
