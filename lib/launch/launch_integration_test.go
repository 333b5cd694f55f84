package launch_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/launch"
)

// launcherTimeout bounds each launcher run, so that a stuck launcher fails
// the test instead of hanging it.
const launcherTimeout = 60 * time.Second

var (
	printenvOnce sync.Once
	printenvPath string
	printenvErr  error
	printenvOut  []byte
)

// buildPrintenv builds testdata/printenv once per test binary.
func buildPrintenv(t *testing.T) string {
	t.Helper()
	printenvOnce.Do(func() {
		dir, err := os.MkdirTemp("", "launch-printenv-")
		if err != nil {
			printenvErr = err
			return
		}
		printenvPath = filepath.Join(dir, "printenv")
		goTool, err := exec.LookPath("go")
		if err != nil {
			printenvErr = err
			return
		}
		cmd := exec.Command(goTool, "build", "-o", printenvPath, "./testdata/printenv")
		printenvOut, printenvErr = cmd.CombinedOutput()
	})
	require.NoError(t, printenvErr, "go build ./testdata/printenv: %s", printenvOut)
	return printenvPath
}

// TestMain removes the printenv binary after the tests.
func TestMain(m *testing.M) {
	code := m.Run()
	if printenvPath != "" {
		os.RemoveAll(filepath.Dir(printenvPath))
	}
	os.Exit(code)
}

// launcherEnv is the test's environment without TRAINWIRE_* (a developer's
// setting would change what the launched processes detect).
func launcherEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRAINWIRE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// runLauncher runs argv and returns the launch.Env of each JSON line it printed.
func runLauncher(t *testing.T, argv []string, env []string) []launch.Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), launcherTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = env
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, ctx.Err(), "%s timed out; stderr:\n%s", argv[0], stderr.String())
	require.NoError(t, err, "%s: stdout:\n%s\nstderr:\n%s", argv, stdout.String(), stderr.String())
	return parseEnvs(t, stdout.Bytes())
}

// parseEnvs returns the launch.Env of each JSON line of out, by rank.
func parseEnvs(t *testing.T, out []byte) []launch.Env {
	t.Helper()
	var envs []launch.Env
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("{")) {
			continue // a launcher's own chatter
		}
		var e launch.Env
		require.NoError(t, json.Unmarshal(line, &e), "%s", line)
		envs = append(envs, e)
	}
	sort.Slice(envs, func(i, j int) bool { return envs[i].Rank < envs[j].Rank })
	return envs
}

// checkOneNode checks n processes of one node: ranks 0..n-1 each once,
// local rank = rank, master on loopback.
func checkOneNode(t *testing.T, envs []launch.Env, n int, source string, port int) {
	t.Helper()
	require.Len(t, envs, n)
	runID := envs[0].RunID
	for i, e := range envs {
		assert.Equal(t, launch.Env{
			Rank: i, World: n, LocalRank: i, LocalWorld: n, NodeRank: 0, NumNodes: 1,
			MasterAddr: "127.0.0.1", MasterPort: port, RunID: runID, Source: source,
		}, e)
	}
}

// lookLauncher returns the launcher's path or skips the test.
func lookLauncher(t *testing.T, candidates ...string) string {
	t.Helper()
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	t.Skipf("no %s installed", strings.Join(candidates, " or "))
	return ""
}

func TestIntegrationOpenMPI(t *testing.T) {
	mpirun := lookLauncher(t, "/usr/bin/mpirun", "mpirun")
	if out, err := exec.Command(mpirun, "--version").CombinedOutput(); err != nil || !bytes.Contains(out, []byte("Open MPI")) {
		t.Skipf("%s is not Open MPI: %s", mpirun, out)
	}
	bin := buildPrintenv(t)
	envs := runLauncher(t, []string{mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "4", bin}, launcherEnv())
	checkOneNode(t, envs, 4, "openmpi", launch.DefaultPort)
	assert.NotEmpty(t, envs[0].RunID, "OMPI_MCA_ess_base_jobid")

	// mpirun -x passes TRAINWIRE_MASTER_ADDR to every rank (docs/launch.md).
	envs = runLauncher(t, []string{mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2",
		"-x", "TRAINWIRE_MASTER_ADDR=10.9.9.9", "-x", "TRAINWIRE_MASTER_PORT=4000", bin}, launcherEnv())
	require.Len(t, envs, 2)
	for _, e := range envs {
		assert.Equal(t, "10.9.9.9:4000", e.Master())
		assert.Equal(t, "openmpi", e.Source)
	}
}

func TestIntegrationTorchrun(t *testing.T) {
	torchrun := lookLauncher(t, "/usr/bin/torchrun", "torchrun")
	bin := buildPrintenv(t)
	port := clitest.FreePort(t)
	// Underscore flags are accepted by torch 1.x and 2.x alike. The
	// redirect mapping for a local rank that does not exist works around
	// torch 1.13 on Python 3.11, whose default "0" parses to None.
	argv := []string{torchrun, "--redirects", "9:0", "--tee", "9:0", "--no_python",
		"--nproc_per_node", "4", "--master_addr", "127.0.0.1", "--master_port", strconv.Itoa(port), bin}
	envs := runLauncher(t, argv, launcherEnv("OMP_NUM_THREADS=1"))
	checkOneNode(t, envs, 4, "torchrun", port+1)
}

// TestIntegrationSlurm runs under a real srun (scripts/slurm.sh's
// single-node cluster): the srun tasks' real SLURM_* variables, then the
// same step with --mpi=pmi2 (PMI's variables win, Slurm's fill in), and
// a batch script, whose own process is no rank but whose srun steps are.
func TestIntegrationSlurm(t *testing.T) {
	env := clitest.Slurm(t)
	bin := buildPrintenv(t)
	envs := runLauncher(t, []string{"srun", "-n", "4", bin}, env)
	checkOneNode(t, envs, 4, "slurm", launch.DefaultPort)
	job := envs[0].RunID
	assert.Regexp(t, `^[0-9]+$`, job, "the run id is SLURM_JOB_ID")

	envs = runLauncher(t, []string{"srun", "-n", "2", "--mpi=pmi2", bin}, env)
	checkOneNode(t, envs, 2, "pmi", launch.DefaultPort)

	// Two steps of one allocation: every task of a step agrees on the run
	// id, which is the job's (steps of one job share it).
	script := filepath.Join(t.TempDir(), "job.sh")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\n"+bin+"\nsrun -n 3 "+bin+"\n"), 0o755))
	out := filepath.Join(t.TempDir(), "out")
	envs = runLauncher(t, []string{"sbatch", "--wait", "-n", "3", "-o", out, script}, env)
	require.Empty(t, envs, "sbatch prints no rank")
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var ranks []launch.Env
	for _, e := range parseEnvs(t, b) {
		if e.Source == "single" {
			assert.Equal(t, 1, e.World, "the batch script itself is no rank of the job (no step): a single process")
			continue
		}
		ranks = append(ranks, e)
	}
	require.Len(t, ranks, 3, "%s", b)
	checkOneNode(t, ranks, 3, "slurm", launch.DefaultPort)
}

func TestIntegrationHydra(t *testing.T) {
	hydra := lookLauncher(t, "mpiexec.hydra")
	bin := buildPrintenv(t)
	envs := runLauncher(t, []string{hydra, "-n", "4", bin}, launcherEnv())
	checkOneNode(t, envs, 4, "pmi", launch.DefaultPort)
}
