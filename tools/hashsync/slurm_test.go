package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
)

// Under a real srun (scripts/slurm.sh's single-node cluster): every rank
// learns rank, world, local rank, node rank, master and run id from the
// SLURM_* variables srun sets — no --rank, --world or --master.

func TestCheckUnderSrun(t *testing.T) {
	env := clitest.Slurm(t)
	bin := clitest.Binary(t, "hashsync")
	port := clitest.FreePort(t)
	srun, err := exec.LookPath("srun")
	require.NoError(t, err)
	launcherRun(t, "srun", []string{srun, "-n", "4", "--export", fmt.Sprintf("ALL,TRAINWIRE_MASTER_PORT=%d", port),
		bin, "check", "--sizes", "64KiB", "--iters", "2", "--format", "json"}, env)
}

// A 4-rank Zen sync under srun, each task reading its own rank's gradients
// (the file named by SLURM_PROCID), equals `hashsync ref` bit for bit.
func TestZenUnderSrun(t *testing.T) {
	env := clitest.Slurm(t)
	bin := clitest.Binary(t, "hashsync")
	dir := t.TempDir()
	const world = 4
	files := genFiles(t, dir, world, "--model", "zipf", "--rows", "20000", "--width", "4", "--density", "0.03", "--steps", "2", "--tensors", "2", "--seed", "11")
	ref, err := exec.Command(bin, append([]string{"ref"}, files...)...).Output()
	require.NoError(t, err)
	clitest.Srun(t, env, world, fmt.Sprintf(`exec %s sync --scheme zen --timeout 30s < %s/rank$SLURM_PROCID.tw > %s/out$SLURM_PROCID.tw`, bin, dir, dir))
	for r := range world {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out%d.tw", r)))
		require.NoError(t, err)
		sameTensors(t, frames(t, ref), frames(t, got), fmt.Sprintf("rank %d", r))
	}
}
