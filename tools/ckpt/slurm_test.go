package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
)

// The agents as a Slurm job would run them: an sbatch script whose srun
// step starts one `ckpt agent` per task, each learning its rank and world
// from the real SLURM_* variables (scripts/slurm.sh's single-node
// cluster). The trainers save, commit and restore through them, and
// scancel stops them all.
func TestAgentsUnderSbatch(t *testing.T) {
	env := clitest.Slurm(t)
	const n = 3
	c := &cluster{t: t, bin: clitest.Binary(t, "ckpt"), dir: t.TempDir(), n: n, procs: map[int]*exec.Cmd{}, logs: map[int]*clitest.Buffer{}}
	for _, port := range clitest.FreePorts(t, n) {
		c.addrs = append(c.addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	script := filepath.Join(c.dir, "agents.sh")
	body := fmt.Sprintf("#!/bin/sh\nexec srun sh -c 'exec %s agent --m 2 --buffer 1MiB --timeout 5s --socket %s/agent$SLURM_PROCID.sock'\n", c.bin, c.dir)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := filepath.Join(c.dir, "job.out")
	// sbatch exports its whole environment (--export=ALL, the default);
	// the peer list holds commas, which an --export list cannot.
	cmd := exec.CommandContext(ctx, "sbatch", "--parsable", "-n", strconv.Itoa(n), "-o", out, script)
	cmd.Env = append(env, "TRAINWIRE_TOKEN=slurm-token", "TRAINWIRE_CKPT_PEERS="+strings.Join(c.addrs, ","))
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, b)
	}
	job := strings.TrimSpace(strings.Split(string(b), ";")[0])
	t.Cleanup(func() {
		cancel := exec.Command("scancel", job)
		cancel.Env = env
		_ = cancel.Run()
		if t.Failed() {
			log, _ := os.ReadFile(out)
			t.Logf("job %s output:\n%s", job, log)
		}
	})
	for r := 0; r < n; r++ {
		waitFor(t, fmt.Sprintf("rank %d's agent under job %s", r, job), func() bool {
			cl, err := agent.Dial(c.sock(r), 5*time.Second, wire.DefaultLimits)
			if err != nil {
				return false
			}
			defer cl.Close()
			m, _, err := cl.Status()
			if err != nil {
				return false
			}
			if m["rank"] != strconv.Itoa(r) || m["world"] != strconv.Itoa(n) {
				t.Fatalf("the agent on socket %d says rank %s of %s: Slurm's SLURM_PROCID/SLURM_NTASKS were not used", r, m["rank"], m["world"])
			}
			return true
		})
	}
	for it := int64(1); it <= 2; it++ {
		c.saveAll(it, allRanks(n), func(r int) []byte { return shard(r, it, small) }, "--format", "raw", "--commit")
	}
	for r := 0; r < n; r++ {
		c.restore(r, shard(r, 2, small), 2, "from local memory")
	}
	stop := exec.Command("scancel", "--signal=TERM", job)
	stop.Env = env
	if b, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("scancel: %v: %s", err, b)
	}
	for r := 0; r < n; r++ {
		waitFor(t, fmt.Sprintf("rank %d's agent to stop on scancel", r), func() bool {
			_, err := os.Stat(c.sock(r))
			return os.IsNotExist(err)
		})
	}
}
