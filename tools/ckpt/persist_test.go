package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"trainwire.dev/lib/cli/clitest"
)

// tool runs a ckpt verb that is not tied to a rank (persist, ls, verify,
// prune) with the job token; it returns stdout, stderr, exit code.
func (c *cluster) tool(args ...string) (string, string, int) {
	c.t.Helper()
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), "TRAINWIRE_TOKEN=e2e-token")
	out, errs, code := clitest.Run(c.t, cmd)
	return string(out), errs, code
}

func (c *cluster) persistArgs(dir string, extra ...string) []string {
	return append([]string{"persist", "--dir", dir, "--peers", strings.Join(c.addrs, ","), "--m", "2", "--run-id", "e2e", "--timeout", "10s"}, extra...)
}

func (c *cluster) persist(dir string, extra ...string) string {
	c.t.Helper()
	_, stderr, code := c.tool(c.persistArgs(dir, extra...)...)
	if code != 0 {
		c.t.Fatalf("persist: exit %d: %s", code, stderr)
	}
	return stderr
}

// lsIters returns the iterations `ckpt ls` lists.
func (c *cluster) lsIters(dir string) string {
	c.t.Helper()
	out, stderr, code := c.tool("ls", "--dir", dir)
	if code != 0 {
		c.t.Fatalf("ls: exit %d: %s", code, stderr)
	}
	var its []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		its = append(its, strings.Fields(l)[0])
	}
	return strings.Join(its, ",")
}

func (c *cluster) restorePersistent(dir string, r int, want []byte, iter int64, extra ...string) {
	c.t.Helper()
	out, stderr, code := c.run(r, nil, "restore", append([]string{"--from", "persistent", "--dir", dir}, extra...)...)
	if code != 0 || !bytes.Equal(out, want) || !strings.Contains(stderr, fmt.Sprintf("restored iteration %d ", iter)) {
		c.t.Fatalf("rank %d restore --from persistent: exit %d, %d bytes (want %d of iteration %d): %s", r, code, len(out), len(want), iter, stderr)
	}
}

// C-RC-6, C-PS-1…3: persist is idempotent, overlapping runs are harmless,
// kill -9 mid-persist publishes nothing, verify catches a flipped bit and
// restore refuses it, prune keeps N and every K-th.
func TestE2EPersist(t *testing.T) {
	c := newCluster(t, 4, "--m", "2", "--buffer", "1MiB")
	dir := filepath.Join(t.TempDir(), "persistent")
	save := func(iter int64, size int) {
		c.saveAll(iter, allRanks(4), func(r int) []byte { return shard(r, iter, size) }, "--format", "raw")
		for r := 0; r < 4; r++ {
			c.waitCommitted(r, iter)
		}
	}
	save(1, small)
	metrics := filepath.Join(t.TempDir(), "ckpt.prom")
	if s := c.persist(dir, "--metrics", metrics, "--tag", "pin"); !strings.Contains(s, "persisted iteration 1 (4 shards") {
		t.Fatalf("persist says %q", s)
	}
	if m, _ := os.ReadFile(metrics); !strings.Contains(string(m), "ckpt_persist_success 1") || !strings.Contains(string(m), fmt.Sprintf("ckpt_persist_bytes %d", 4*small)) {
		t.Fatalf("metrics:\n%s", m)
	}
	if s := c.persist(dir); !strings.Contains(s, "iteration 1 is already persisted") {
		t.Fatalf("second persist of the same iteration says %q", s)
	}
	for r := 0; r < 4; r++ {
		c.restorePersistent(dir, r, shard(r, 1, small), 1)
	}
	// The cron pipeline: persist (nothing new), prune, verify, metrics.
	mdir := t.TempDir()
	for _, job := range []string{"persist", "verify"} {
		cmd := exec.Command("bash", "../../pipelines/ckpt-cron.sh", job)
		cmd.Env = append(os.Environ(), "CKPT="+c.bin, "TRAINWIRE_TOKEN=e2e-token", "TRAINWIRE_CKPT_PERSISTENT="+dir,
			"TRAINWIRE_CKPT_PEERS="+strings.Join(c.addrs, ","), "TRAINWIRE_RUN_ID=e2e", "METRICS_DIR="+mdir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("ckpt-cron.sh %s: %v\n%s", job, err, out)
		}
		if m, _ := os.ReadFile(filepath.Join(mdir, "ckpt_"+job+".prom")); !strings.Contains(string(m), "ckpt_"+job+"_success 1") {
			t.Fatalf("ckpt-cron.sh %s metrics:\n%s", job, m)
		}
	}

	// Two overlapping runs: one persists; the other finds the lock held
	// and exits 75 (skipped), or runs after it and finds nothing to do;
	// the catalog is sound.
	save(2, small)
	var wg sync.WaitGroup
	res := make([]string, 2)
	for i := range res {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, stderr, code := c.tool(c.persistArgs(dir)...)
			res[i] = fmt.Sprintf("exit %d: %s", code, stderr)
		}(i)
	}
	wg.Wait()
	ok := 0
	for _, r := range res {
		switch {
		case strings.HasPrefix(r, "exit 0"):
			ok++
		case !strings.HasPrefix(r, "exit 75") || !strings.Contains(r, "skipped"):
			t.Fatalf("overlapping persist: %s", r)
		}
	}
	if ok == 0 {
		t.Fatalf("neither overlapping persist succeeded: %q", res)
	}
	if got := c.lsIters(dir); got != "1,2" {
		t.Fatalf("ls after overlapping runs: %s (%q)", got, res)
	}

	// kill -9 mid-persist (rate-capped so the kill lands while shard files
	// are being written): the catalog still names 1 and 2 only.
	save(3, 2<<20)
	cmd := exec.Command(c.bin, c.persistArgs(dir, "--rate", "2MB")...)
	cmd.Env = append(os.Environ(), "TRAINWIRE_TOKEN=e2e-token")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "persist to be writing shard files", func() bool {
		m, _ := filepath.Glob(filepath.Join(dir, ".tmp-*", "rank-*.shard"))
		for _, f := range m {
			if st, err := os.Stat(f); err == nil && st.Size() > 0 && !strings.HasSuffix(f, "rank-00003.shard") {
				return len(m) >= 2
			}
		}
		return false
	})
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	if got := c.lsIters(dir); got != "1,2" {
		t.Fatalf("ls after kill -9 mid-persist: %s", got)
	}
	if _, stderr, code := c.tool("verify", "--dir", dir); code != 0 {
		t.Fatalf("verify after kill -9: exit %d: %s", code, stderr)
	}
	c.restorePersistent(dir, 2, shard(2, 2, small), 2)
	if _, _, code := c.run(2, nil, "restore", "--from", "persistent", "--dir", dir, "--iter", "3"); code == 0 {
		t.Fatal("restore of the half-persisted iteration 3 succeeded")
	}
	// The next run cleans up and publishes 3.
	if s := c.persist(dir); !strings.Contains(s, "persisted iteration 3") {
		t.Fatalf("persist after the kill says %q", s)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(m) != 0 {
		t.Fatalf("leftovers: %v", m)
	}
	c.restorePersistent(dir, 3, shard(3, 3, 2<<20), 3)

	// A flipped bit: verify names the shard, restore refuses it.
	f := filepath.Join(dir, "iter-000000000003", "rank-00002.shard")
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b[12345] ^= 0x10
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := c.tool("verify", "--dir", dir)
	if code == 0 || !strings.Contains(out, "BAD iteration 3, rank 2 (iter-000000000003/rank-00002.shard)") || strings.Contains(out, "rank 1") {
		t.Fatalf("verify of a flipped bit: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := c.run(2, nil, "restore", "--from", "persistent", "--dir", dir); code == 0 || len(out) != 0 || !strings.Contains(stderr, "refusing a corrupt persisted shard") {
		t.Fatalf("restore of a corrupt shard: exit %d, %d bytes: %s", code, len(out), stderr)
	}
	b[12345] ^= 0x10
	_ = os.WriteFile(f, b, 0o644)

	// Prune --keep 1 --keep-every 4 over 1 (pinned) … 5: keeps 5 (newest),
	// 4 (divisible by 4) and 1 (pin); drops 2 and 3, catalog first.
	save(4, small)
	c.persist(dir)
	save(5, small)
	c.persist(dir)
	if out, stderr, code := c.tool("prune", "--dir", dir, "--keep", "1", "--keep-every", "4"); code != 0 || out != "prune 2\nprune 3\n" {
		t.Fatalf("prune: exit %d, %q: %s", code, out, stderr)
	}
	if got := c.lsIters(dir); got != "1,4,5" {
		t.Fatalf("ls after prune: %s", got)
	}
	for _, gone := range []string{"iter-000000000002", "iter-000000000003"} {
		if _, err := os.Stat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Fatalf("%s still there after prune (%v)", gone, err)
		}
	}
	if _, stderr, code := c.tool("verify", "--dir", dir); code != 0 {
		t.Fatalf("verify after prune: exit %d: %s", code, stderr)
	}
}

// C-RC-4 with the persistent tier: a whole group is lost, and every rank
// (survivors and replacements) restores the same persisted iteration.
func TestE2ELostGroupPersistent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "persistent")
	c := newCluster(t, 4, "--m", "2", "--buffer", "1MiB", "--persistent", dir)
	for _, it := range []int64{1, 2} {
		c.saveAll(it, allRanks(4), func(r int) []byte { return shard(r, it, small) }, "--format", "raw")
		for r := 0; r < 4; r++ {
			c.waitCommitted(r, it)
		}
		if it == 1 {
			c.persist(dir)
		}
	}
	c.kill(0)
	c.kill(1)
	for _, r := range []int{2, 3} {
		c.restore(r, shard(r, 1, small), 1, "from persistent storage")
	}
	c.start(0, nil)
	c.start(1, nil)
	for r := 0; r < 4; r++ {
		c.restore(r, shard(r, 1, small), 1, "from persistent storage")
	}
}

// A persistent directory that cannot take the bytes (here RLIMIT_FSIZE:
// "file too large", as a full disk gives "no space left") is this
// machine's failure, not the agents': exit 1 naming the file, no other
// holder tried, nothing published, no temporary directory left, and the
// next run with room persists the same iteration.
func TestE2EPersistDiskFailure(t *testing.T) {
	c := newCluster(t, 2, "--m", "2", "--buffer", "1MiB")
	dir := filepath.Join(t.TempDir(), "persistent")
	c.saveAll(1, allRanks(2), func(r int) []byte { return shard(r, 1, small) }, "--format", "raw")
	for r := 0; r < 2; r++ {
		c.waitCommitted(r, 1)
	}
	// ulimit -f counts KiB: half a shard fits, the catalog's files fit.
	cmd := exec.Command("bash", append([]string{"-c", `ulimit -f 512 && exec "$0" "$@"`, c.bin}, c.persistArgs(dir)...)...)
	cmd.Env = append(os.Environ(), "TRAINWIRE_TOKEN=e2e-token")
	_, stderr, code := clitest.Run(t, cmd)
	if code != 1 || !strings.Contains(stderr, "writing rank 0's shard of iteration 1 to ") || !strings.Contains(stderr, "file too large") {
		t.Fatalf("persist into a directory that cannot hold a shard: exit %d (want 1, the disk's failure): %s", code, stderr)
	}
	if strings.Contains(stderr, "from rank 1") {
		t.Fatalf("persist tried another holder after its own disk failed: %s", stderr)
	}
	if its := c.lsIters(dir); its != "" {
		t.Fatalf("a failed persist published iterations %q", its)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*")); len(left) != 0 {
		t.Fatalf("a failed persist left %v", left)
	}
	if s := c.persist(dir); !strings.Contains(s, "persisted iteration 1 (2 shards") {
		t.Fatalf("persist with room says %q", s)
	}
	for r := 0; r < 2; r++ {
		c.restorePersistent(dir, r, shard(r, 1, small), 1)
	}
}
