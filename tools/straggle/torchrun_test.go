package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
)

// torchrun's elastic path (issue 21): `torchrun --max_restarts 1` where one
// worker is killed with SIGKILL mid-run. In the first attempt the other
// ranks go on without it (RNA); torchrun then restarts every worker, which
// rendezvous afresh under TORCHELASTIC_RESTART_COUNT=1 — no stale mesh
// from the first attempt — and the job finishes with all four ranks.
func TestRestartUnderTorchrun(t *testing.T) {
	torchrun := "/usr/bin/torchrun"
	if _, err := os.Stat(torchrun); err != nil {
		if os.Getenv("TRAINWIRE_REQUIRE_PYTHON") == "1" {
			t.Fatalf("torchrun missing (%v): scripts/deps.sh installs python3-torch", err)
		}
		t.Skip("torchrun not installed (python3-torch)")
	}
	bin := clitest.Binary(t, "straggle")
	dir := t.TempDir()
	// Each attempt of each worker leaves a line; rank 2 kills itself
	// with SIGKILL 1.5 s into the first attempt (the run needs several).
	worker := filepath.Join(dir, "worker.sh")
	script := fmt.Sprintf(`#!/bin/sh
echo "$TORCHELASTIC_RESTART_COUNT" >> %[1]s/attempts-$RANK
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$RANK" = 2 ]; then
  (sleep 1.5; kill -9 $$) &
fi
exec %[2]s sync --toy quadratic --emit stats --timeout 10s --rounds 600 --compute 10ms --report %[1]s/report-$RANK.json > /dev/null
`, dir, bin)
	require.NoError(t, os.WriteFile(worker, []byte(script), 0o755))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	port := clitest.FreeLauncherPort(t)
	// torch 1.13 on Python 3.11: --redirects/--tee avoid its default's crash.
	cmd := exec.CommandContext(ctx, torchrun, "--max_restarts", "1", "--nproc_per_node", "4", "--master_addr", "127.0.0.1",
		"--master_port", fmt.Sprint(port), "--redirects", "9:0", "--tee", "9:0", "--no_python", worker)
	cmd.Env = append(os.Environ(), "TRAINWIRE_TOKEN=elastic", "OMP_NUM_THREADS=1")
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "torchrun: %s", out)
	for r := range 4 {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("attempts-%d", r)))
		require.NoError(t, err)
		assert.Equal(t, []string{"0", "1"}, strings.Fields(string(b)), "rank %d's attempts (torchrun restarts every worker once)", r)
		var rep report
		b, err = os.ReadFile(filepath.Join(dir, fmt.Sprintf("report-%d.json", r)))
		require.NoError(t, err, "rank %d: no report from the second attempt", r)
		require.NoError(t, json.Unmarshal(b, &rep))
		assert.Equal(t, 600, rep.Rounds, "rank %d", r)
	}
	if !strings.Contains(string(out), "going on without it") {
		t.Errorf("the first attempt's survivors did not go on without rank 2:\n%s", out)
	}
}
