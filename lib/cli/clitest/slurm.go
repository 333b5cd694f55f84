package clitest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SlurmDir is where scripts/slurm.sh keeps its single-node cluster
// (TRAINWIRE_SLURM_DIR overrides it, for the script and the tests alike).
func SlurmDir() string {
	if d := os.Getenv("TRAINWIRE_SLURM_DIR"); d != "" {
		return d
	}
	return "/tmp/trainwire-slurm"
}

// Slurm returns the environment for running srun and sbatch against the
// cluster scripts/slurm.sh started (SLURM_CONF set, TRAINWIRE_* removed so
// that the tools learn everything from Slurm), or skips the test saying
// why there is none: the reason the script wrote when a daemon could not
// start, or how to start one. With TRAINWIRE_REQUIRE_SLURM=1 (make
// test-go, after the script started the cluster) a missing cluster fails
// the test instead.
func Slurm(t testing.TB) []string {
	t.Helper()
	dir := SlurmDir()
	conf := filepath.Join(dir, "slurm.conf")
	why := ""
	if b, err := os.ReadFile(filepath.Join(dir, "skip")); err == nil {
		why = "scripts/slurm.sh could not start Slurm: " + strings.TrimSpace(string(b))
	} else if _, err := os.Stat(conf); err != nil {
		why = "no Slurm cluster (bash scripts/slurm.sh start starts one; make test-go does)"
	} else if state, ok := slurmReady(conf); !ok {
		why = "the Slurm cluster of " + conf + " does not answer: sinfo says " + state
	}
	if why != "" {
		if os.Getenv("TRAINWIRE_REQUIRE_SLURM") == "1" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRAINWIRE_") && !strings.HasPrefix(kv, "SLURM_") {
			env = append(env, kv)
		}
	}
	return append(env, "SLURM_CONF="+conf)
}

// slurmReady waits up to 30 s for the node to take jobs (idle, or busy
// with another test's: mixed, allocated, completing) and returns its
// state.
func slurmReady(conf string) (string, bool) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		cmd := exec.CommandContext(ctx, "sinfo", "-h", "-o", "%T")
		cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
		out, err := cmd.CombinedOutput()
		cancel()
		state := strings.TrimSpace(string(out))
		if err == nil {
			switch strings.TrimRight(state, "*~#!%$@^-") {
			case "idle", "mixed", "allocated", "completing":
				return state, true
			}
		}
		if time.Now().After(deadline) {
			return state, false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// Srun runs script (sh -c) as n tasks of a step of the cluster Slurm(t)
// returned (env), each task's TRAINWIRE_MASTER_PORT a port that was free,
// and fails the test with the step's output if it fails or outlives two
// minutes; it returns that output.
func Srun(t testing.TB, env []string, n int, script string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "srun", "-n", strconv.Itoa(n),
		"--export", "ALL,TRAINWIRE_MASTER_PORT="+strconv.Itoa(FreePort(t)), "sh", "-c", script)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("srun -n %d sh -c %q: %v (timed out: %v)\n%s", n, script, err, ctx.Err() != nil, out)
	}
	return out
}
