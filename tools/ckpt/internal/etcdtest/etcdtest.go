// Package etcdtest starts a real etcd for ckpt's tests (the agents' e2e
// tests and internal/health's): on free loopback ports, with a temporary
// data directory, stopped when the test ends.
package etcdtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"trainwire.dev/lib/cli/clitest"
)

// Bin is the etcd server scripts/deps.sh installs (Debian's etcd-server).
const Bin = "/usr/bin/etcd"

// Start starts etcd and returns its client endpoint once it serves.
// Without Bin the test is skipped, unless TRAINWIRE_REQUIRE_PYTHON is set
// (CI), where it fails.
func Start(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(Bin); err != nil {
		if os.Getenv("TRAINWIRE_REQUIRE_PYTHON") != "" {
			t.Fatalf("%s is missing (scripts/deps.sh installs etcd-server)", Bin)
		}
		t.Skipf("%s is missing: install etcd-server (scripts/deps.sh) to run the etcd tests", Bin)
	}
	ports := clitest.FreePorts(t, 2)
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	cmd := exec.Command(Bin, "--name", "tw", "--data-dir", filepath.Join(t.TempDir(), "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "tw="+peer,
		"--heartbeat-interval", "50", "--election-timeout", "500")
	log := &clitest.Buffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("etcd log:\n%s", log)
		}
	})
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{client}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cli.Get(ctx, "x")
		cancel()
		if err == nil {
			return client
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd did not serve within 60 s: %v\n%s", err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
