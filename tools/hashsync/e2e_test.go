package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
)

// startRanks starts world ranks of `hashsync check` with a shared master.
func startRanks(t *testing.T, ctx context.Context, world int, env []string, args ...string) []*clitest.Proc {
	t.Helper()
	bin := clitest.Binary(t, "hashsync")
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	procs := make([]*clitest.Proc, world)
	for r := range world {
		procs[r] = clitest.Start(t, ctx, bin, env, nil, append([]string{"check", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--master", master}, args...)...)
	}
	return procs
}

// waitLogged waits until every process has written want to its stderr.
// A test that kills a rank waits for its mesh to be up first: a rank lost
// during the rendezvous fails Open, but one killed before it even dialled
// rank 0 leaves the others waiting for it until --connect-timeout (120 s),
// past the test's deadline. A fixed sleep (1.5–2 s) was not always enough
// on a loaded machine.
func waitLogged(t *testing.T, procs []*clitest.Proc, want string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for r := 0; r < len(procs); {
		if strings.Contains(procs[r].Stderr.String(), want) {
			r++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank %d did not log %q within 60 s: %s", r, want, procs[r].Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestCheckFourProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	procs := startRanks(t, ctx, 4, []string{"TRAINWIRE_TOKEN=e2e"}, "--sizes", "4096,1MiB", "--iters", "2", "--format", "json")
	for r, p := range procs {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
		if r > 0 {
			assert.Empty(t, p.Stdout.String(), "rank %d wrote to stdout", r)
		}
	}
	lines := strings.Split(strings.TrimSpace(procs[0].Stdout.String()), "\n")
	require.Len(t, lines, 2)
	for _, l := range lines {
		var res map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &res))
		assert.Equal(t, true, res["correct"])
		assert.Equal(t, float64(4), res["world"])
		assert.Equal(t, "unix", res["transport"])
	}
}

func TestCheckKilledRankIsNamed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	procs := startRanks(t, ctx, 4, nil, "--sizes", "4MiB", "--iters", "100000", "--timeout", "10s")
	waitLogged(t, procs, "check: mesh up")
	const victim = 2
	require.NoError(t, procs[victim].Cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	for r, p := range procs {
		err := p.Cmd.Wait()
		if r == victim {
			continue
		}
		assert.Equal(t, 3, clitest.ExitCode(err), "rank %d: %s", r, p.Stderr.String())
		assert.Contains(t, p.Stderr.String(), "rank 2", "rank %d does not name the dead rank", r)
	}
	// Every survivor is gone well within its 10 s deadline.
	assert.Less(t, time.Since(killed), 10*time.Second)
}

func TestCheckWrongTokenRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bin := clitest.Binary(t, "hashsync")
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	run := func(rank int, token string, out *bytes.Buffer) *exec.Cmd {
		c := exec.CommandContext(ctx, bin, "check", "--rank", fmt.Sprint(rank), "--world", "2", "--master", master,
			"--sizes", "4096", "--iters", "1", "--timeout", "3s", "--connect-timeout", "4s")
		c.Env = append(os.Environ(), "TRAINWIRE_TOKEN="+token)
		c.Stderr = out
		require.NoError(t, c.Start())
		return c
	}
	var e0, e1 bytes.Buffer
	c0 := run(0, "right", &e0)
	c1 := run(1, "wrong", &e1)
	assert.Equal(t, 3, clitest.ExitCode(c1.Wait()), e1.String())
	assert.Contains(t, e1.String(), "token")
	assert.NotEqual(t, 0, clitest.ExitCode(c0.Wait()), e0.String())
}

// launcherRun runs hashsync check under a real launcher and checks rank
// 0's report.
func launcherRun(t *testing.T, name string, argv []string, env []string) {
	if _, err := os.Stat(argv[0]); err != nil {
		t.Skipf("%s not installed (%s)", name, argv[0])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "%s: %s", name, stderr.String())
	var res map[string]any
	require.NoError(t, json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &res), "stdout %q stderr %s", stdout.String(), stderr.String())
	assert.Equal(t, true, res["correct"])
	assert.Equal(t, float64(4), res["world"])
}

func TestCheckUnderMpirun(t *testing.T) {
	bin := clitest.Binary(t, "hashsync")
	port := clitest.FreePort(t)
	launcherRun(t, "mpirun", []string{"/usr/bin/mpirun", "--allow-run-as-root", "--oversubscribe", "-np", "4",
		"-x", fmt.Sprintf("TRAINWIRE_MASTER_PORT=%d", port), bin, "check", "--sizes", "64KiB", "--iters", "2", "--format", "json"}, nil)
}

func TestCheckUnderTorchrun(t *testing.T) {
	bin := clitest.Binary(t, "hashsync")
	port := clitest.FreeLauncherPort(t) // torchrun's store takes port, our rendezvous port+1
	// torch 1.13's torchrun spells its flags with underscores (2.x accepts
	// both); its default redirects crash on Python 3.11, hence --redirects.
	launcherRun(t, "torchrun", []string{"/usr/bin/torchrun", "--no_python", "--nproc_per_node", "4",
		"--master_addr", "127.0.0.1", "--master_port", fmt.Sprint(port), "--redirects", "9:0", "--tee", "9:0",
		bin, "check", "--sizes", "64KiB", "--iters", "2", "--format", "json"}, nil)
}
