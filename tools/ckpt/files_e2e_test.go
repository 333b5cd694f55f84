package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
)

// These tests run real ckpt processes (agents, save, restore, persist,
// export, the catalog verbs) and check what they leave in the caller's
// files and directories when they fail, and that bad input is refused with
// the documented exit codes (issue 23, defects 4–7; issue 24's empty save).

// precious is what the caller's file held before a restore into it.
var precious = bytes.Repeat([]byte("the caller's good state\n"), 40)

// onlyFile fails t unless dir holds exactly one entry, name, with want in
// it: nothing damaged, no temporary file left behind.
func onlyFile(t *testing.T, dir, name string, want []byte, what string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != name {
		t.Fatalf("%s: %s holds %q, want only %s", what, dir, names, name)
	}
	got, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s: %s changed: %d bytes, want the %d it held", what, name, len(got), len(want))
	}
}

// written returns how many bytes a restore into dir/name has written so
// far: the target's size once it no longer holds precious (a restore that
// writes in place), or the largest other file (a temporary file).
func written(dir, name string) int64 {
	ents, _ := os.ReadDir(dir)
	var n int64
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			continue
		}
		if e.Name() == name && info.Size() == int64(len(precious)) {
			continue
		}
		n = max(n, info.Size())
	}
	return n
}

// midRestore starts `restore -o dir/state.bin` of rank r (iteration total
// bytes long), stops the restore process (SIGSTOP) once it has written
// part of the state and is far enough from the end that the rest cannot
// be sitting in socket buffers, runs hit (kill the agent, interrupt the
// client…), lets the restore go on (SIGCONT) and returns its stderr and
// exit code. A restore that got too far before the stop is let finish and
// tried again.
func midRestore(t *testing.T, c *cluster, r int, dir string, total int64, hit func(p *exec.Cmd)) (string, int) {
	t.Helper()
	out := filepath.Join(dir, "state.bin")
	for attempt := 0; attempt < 20; attempt++ {
		if err := os.WriteFile(out, precious, 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(c.bin, append(append([]string{"restore"}, c.rankArgs(r)...), "-o", out)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		stopped, ended := false, false
		for !stopped && !ended {
			select {
			case err := <-done:
				t.Logf("attempt %d: the restore ended before it could be stopped (%v)", attempt, err)
				ended = true
			default:
				if written(dir, "state.bin") > 0 {
					_ = cmd.Process.Signal(syscall.SIGSTOP)
					stopped = true
				} else {
					time.Sleep(100 * time.Microsecond)
				}
			}
		}
		if ended {
			continue
		}
		if n := written(dir, "state.bin"); n > total-32<<20 {
			t.Logf("attempt %d: stopped at %d of %d bytes, too close to the end", attempt, n, total)
			_ = cmd.Process.Signal(syscall.SIGCONT)
			<-done
			continue
		}
		hit(cmd)
		_ = cmd.Process.Signal(syscall.SIGCONT)
		err := <-done
		return stderr.String(), clitest.ExitCode(err)
	}
	t.Fatal("no restore could be stopped midway in 20 attempts")
	return "", 0
}

// Defect 4: a restore that fails (an iteration that does not exist, the
// agent killed mid-way, the user's Ctrl-C, a shard that cannot be
// converted) leaves the caller's -o file as it was and no temporary file.
func TestE2ERestoreFailureKeepsFile(t *testing.T) {
	c := newCluster(t, 2, "--m", "2", "--buffer", "4MiB")
	const big = 96 << 20
	data := func(r int) []byte {
		if r == 0 {
			return shard(0, 1, big)
		}
		return shard(r, 1, small)
	}
	c.saveAll(1, allRanks(2), data, "--format", "raw", "--commit")
	dir := t.TempDir()
	out := filepath.Join(dir, "state.bin")
	for _, args := range [][]string{{"--iter", "99"}, {"--iter", "99", "--shm"}, {"--iter", "99", "--format", "safetensors"}} {
		if err := os.WriteFile(out, precious, 0o644); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := c.run(0, nil, "restore", append(args, "-o", out)...)
		if code == 0 {
			t.Fatalf("restore %v of an iteration never saved: exit 0: %s", args, stderr)
		}
		onlyFile(t, dir, "state.bin", precious, fmt.Sprintf("restore %v that failed (exit %d)", args, code))
	}
	// A raw shard asked for as safetensors: refused (exit 2), file intact.
	_, stderr, code := c.run(1, nil, "restore", "--format", "safetensors", "-o", out)
	if code != cli.ExitBadInput {
		t.Fatalf("restore --format safetensors of a raw shard: exit %d, want 2: %s", code, stderr)
	}
	onlyFile(t, dir, "state.bin", precious, "restore --format safetensors of a raw shard")

	// Ctrl-C mid-restore: exit 130, the file as it was.
	stderr, code = midRestore(t, c, 0, dir, big, func(p *exec.Cmd) { _ = p.Process.Signal(syscall.SIGINT) })
	if code != cli.ExitInterrupted {
		t.Fatalf("restore interrupted midway: exit %d, want 130: %s", code, stderr)
	}
	onlyFile(t, dir, "state.bin", precious, "restore interrupted midway")

	// A successful restore replaces the file.
	if _, stderr, code := c.run(0, nil, "restore", "-o", out); code != 0 {
		t.Fatalf("restore -o: exit %d: %s", code, stderr)
	}
	onlyFile(t, dir, "state.bin", data(0), "restore -o")

	// The agent killed mid-restore.
	stderr, code = midRestore(t, c, 0, dir, big, func(*exec.Cmd) { c.kill(0) })
	if code == 0 {
		t.Fatalf("restore whose agent was killed midway: exit 0: %s", stderr)
	}
	onlyFile(t, dir, "state.bin", precious, fmt.Sprintf("restore whose agent was killed midway (exit %d)", code))
}

// Defect 4 on the persistent tier: export is all or nothing, and restore
// --from persistent that cannot convert the shard leaves the file alone.
func TestE2EExportAllOrNothing(t *testing.T) {
	c := newCluster(t, 3, "--m", "2", "--buffer", "1MiB")
	pdir := filepath.Join(t.TempDir(), "persistent")
	c.saveAll(1, allRanks(3), func(r int) []byte { return shard(r, 1, small) }, "--format", "raw", "--commit")
	c.persist(pdir)
	dir := t.TempDir()
	out := filepath.Join(dir, "state.bin")
	if err := os.WriteFile(out, precious, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr, code := c.run(1, nil, "restore", "--from", "persistent", "--dir", pdir, "--format", "frames", "-o", out)
	if code != cli.ExitBadInput {
		t.Fatalf("restore --from persistent --format frames of a raw shard: exit %d, want 2: %s", code, stderr)
	}
	onlyFile(t, dir, "state.bin", precious, "restore --from persistent that could not convert")

	// Rank 2's shard is corrupt: export writes no file at all.
	f := filepath.Join(pdir, "iter-000000000001", "rank-00002.shard")
	flipByte(t, f, 1000, 1)
	edir := filepath.Join(t.TempDir(), "export")
	_, stderr, code = c.tool("export", "--dir", pdir, "-o", edir)
	if code == 0 || !strings.Contains(stderr, "rank-00002.shard") {
		t.Fatalf("export with a corrupt shard: exit %d: %s", code, stderr)
	}
	if ents, _ := os.ReadDir(edir); len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("export that failed on rank 2 left %q", names)
	}
	// A directory that already holds an export keeps it.
	flipByte(t, f, 1000, 1)
	if _, stderr, code := c.tool("export", "--dir", pdir, "-o", edir); code != 0 {
		t.Fatalf("export: exit %d: %s", code, stderr)
	}
	before := map[string][]byte{}
	for r := 0; r < 3; r++ {
		name := fmt.Sprintf("rank-%05d.safetensors", r)
		before[name], _ = os.ReadFile(filepath.Join(edir, name))
	}
	flipByte(t, f, 1000, 1)
	if _, stderr, code := c.tool("export", "--dir", pdir, "-o", edir); code == 0 {
		t.Fatalf("second export with a corrupt shard: exit 0: %s", stderr)
	}
	ents, _ := os.ReadDir(edir)
	if len(ents) != 3 {
		t.Fatalf("export directory holds %d entries after a failed export, want the 3 files", len(ents))
	}
	for name, want := range before {
		if got, _ := os.ReadFile(filepath.Join(edir, name)); len(want) == 0 || !bytes.Equal(got, want) {
			t.Fatalf("a failed export changed %s", name)
		}
	}
}

// flipByte flips bit mask of byte at in file f.
func flipByte(t *testing.T, f string, at int, mask byte) {
	t.Helper()
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= mask
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// flipSSTs flips one byte in every sstable of dir's catalog; it fails t
// when there is none (the entries would still be in the WAL).
func flipSSTs(t *testing.T, dir string) {
	t.Helper()
	ssts, _ := filepath.Glob(filepath.Join(dir, "catalog", "*.sst"))
	if len(ssts) == 0 {
		t.Fatal("the catalog has no sstable to corrupt")
	}
	for _, p := range ssts {
		flipByte(t, p, 40, 0x40)
	}
}

// Defect 5: a corrupt catalog is an error naming it (exit 1, no panic),
// and `ckpt catalog rebuild` restores it from the shard files and the
// manifests persist writes beside them: the same listing, byte-exact
// restores.
func TestE2ECatalogCorruptionRebuild(t *testing.T) {
	c := newCluster(t, 2, "--m", "2", "--buffer", "1MiB")
	dir := filepath.Join(t.TempDir(), "persistent")
	var wireShard [2][]byte
	for r := range wireShard {
		var b bytes.Buffer
		w := wire.NewWriter(&b, "test")
		if err := w.Write(&wire.Dense{Name: "w", Rank: int64(r), DType: "u8", Shape: []int64{small}, Data: shard(r, 2, small)}); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		wireShard[r] = b.Bytes()
	}
	want := map[int64]func(r int) []byte{
		1: func(r int) []byte { return shard(r, 1, small) },
		2: func(r int) []byte { return wireShard[r] },
	}
	c.saveAll(1, allRanks(2), want[1], "--format", "raw", "--commit")
	c.persist(dir, "--tag", "pin")
	c.saveAll(2, allRanks(2), want[2], "--commit")
	c.persist(dir)
	listing, stderr, code := c.tool("ls", "--dir", dir, "--format", "json")
	if code != 0 || strings.Count(listing, "\n") != 2 || !strings.Contains(listing, `"format":"wire"`) || !strings.Contains(listing, `"tags":["pin"]`) {
		t.Fatalf("ls --format json: exit %d: %s%s", code, listing, stderr)
	}

	// What persist wrote (a wire save is kept as the agent re-encoded it).
	persisted := map[int64][][]byte{}
	for it := range want {
		for r := 0; r < 2; r++ {
			out, stderr, code := c.run(r, nil, "restore", "--from", "persistent", "--dir", dir, "--iter", strconv.FormatInt(it, 10))
			if code != 0 {
				t.Fatalf("restore --from persistent: exit %d: %s", code, stderr)
			}
			persisted[it] = append(persisted[it], out)
		}
	}
	if !bytes.Equal(persisted[1][1], want[1](1)) {
		t.Fatal("the persisted raw shard differs from the saved one")
	}

	flipSSTs(t, dir)
	catDir := filepath.Join(dir, "catalog")
	for _, args := range [][]string{
		{"ls", "--dir", dir},
		{"verify", "--dir", dir},
		{"restore", "--from", "persistent", "--dir", dir, "--rank", "0", "--world", "2"},
		{"export", "--dir", dir, "-o", filepath.Join(t.TempDir(), "x")},
		{"prune", "--dir", dir, "--keep", "1"},
	} {
		_, stderr, code := c.tool(args...)
		if code != cli.ExitFailure || strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") ||
			!strings.Contains(stderr, catDir) || !strings.Contains(stderr, "ckpt catalog rebuild") {
			t.Fatalf("%s on a corrupt catalog: exit %d (want 1, an error naming %s and the way out): %.2000s", args[0], code, catDir, stderr)
		}
	}

	_, stderr, code = c.tool("catalog", "rebuild", "--dir", dir)
	if code != 0 || !strings.Contains(stderr, "2 iterations") {
		t.Fatalf("catalog rebuild: exit %d: %s", code, stderr)
	}
	if got, stderr, code := c.tool("ls", "--dir", dir, "--format", "json"); code != 0 || got != listing {
		t.Fatalf("ls --format json after the rebuild: exit %d:\n%s\nwant\n%s%s", code, got, listing, stderr)
	}
	if _, stderr, code := c.tool("verify", "--dir", dir); code != 0 {
		t.Fatalf("verify after the rebuild: exit %d: %s", code, stderr)
	}
	for it, data := range persisted {
		for r := 0; r < 2; r++ {
			c.restorePersistent(dir, r, data[r], it, "--iter", strconv.FormatInt(it, 10))
		}
	}
	// The corrupt catalog is kept aside, not deleted.
	if old, _ := filepath.Glob(filepath.Join(dir, "catalog.corrupt-*")); len(old) != 1 {
		t.Fatalf("the old catalog kept aside: %v", old)
	}

	// An iteration directory whose shard does not match its manifest is
	// left out of the rebuilt catalog, named, and the rebuild exits 1.
	f := filepath.Join(dir, "iter-000000000002", "rank-00001.shard")
	flipByte(t, f, 100, 1)
	_, stderr, code = c.tool("catalog", "rebuild", "--dir", dir)
	if code != cli.ExitFailure || !strings.Contains(stderr, "quarantine-iter-000000000002/rank-00001.shard") || !strings.Contains(stderr, "1 iteration") {
		t.Fatalf("catalog rebuild with a corrupt shard: exit %d: %s", code, stderr)
	}
	if its := c.lsIters(dir); its != "1" {
		t.Fatalf("ls after a rebuild that left iteration 2 out: %q", its)
	}
	if _, err := os.Stat(filepath.Join(dir, "quarantine-iter-000000000002", "rank-00001.shard")); err != nil {
		t.Fatalf("the left-out directory is not kept: %v", err)
	}
	c.restorePersistent(dir, 1, want[1](1), 1)

	// A directory persisted before manifests existed, under a corrupt
	// catalog: its entry is taken from the shard files.
	if err := os.Remove(filepath.Join(dir, "iter-000000000001", "manifest.json")); err != nil {
		t.Fatal(err)
	}
	c.lsIters(dir) // the entries move from the WAL into an sstable
	flipSSTs(t, dir)
	out, stderr, code := c.tool("catalog", "rebuild", "--dir", dir)
	if code != 0 || !strings.Contains(out, "iteration 1: 2 shards") || !strings.Contains(out, "from the shard files") {
		t.Fatalf("catalog rebuild of a directory without manifest: exit %d: %s%s", code, out, stderr)
	}
	for r := 0; r < 2; r++ {
		c.restorePersistent(dir, r, want[1](r), 1)
	}
	if _, stderr, code := c.tool("verify", "--dir", dir); code != 0 {
		t.Fatalf("verify after the rebuild from shard files: exit %d: %s", code, stderr)
	}
}

// Defect 6: raw states whose first byte is a msgpack map code are saved as
// raw by the default --format auto, and restored byte-exact.
func TestE2ESaveRawLooksLikeStream(t *testing.T) {
	c := newCluster(t, 2, "--m", "2", "--buffer", "1MiB")
	for i, first := range []byte{0x80, 0x85, 0x8f, 0xde, 0xdf} {
		it := int64(i + 1)
		data := func(r int) []byte {
			b := shard(r, it, small+r)
			b[0] = first
			if first == 0x85 { // even a map whose first key is "t"
				copy(b[1:], "\xa1t\xa6header")
			}
			return b
		}
		c.saveAll(it, allRanks(2), data, "--commit")
		for r := 0; r < 2; r++ {
			c.restore(r, data(r), it, "raw")
		}
	}
}

// Defect 7 and issue 24: empty and header-only saves are bad input (exit
// 2), refused before the agent records anything.
func TestE2ESaveEmptyRefused(t *testing.T) {
	c := newCluster(t, 1, "--m", "1", "--buffer", "1MiB")
	var hdrOnly bytes.Buffer
	if err := wire.NewWriter(&hdrOnly, "test").Close(); err != nil {
		t.Fatal(err)
	}
	st := filepath.Join(t.TempDir(), "empty.safetensors")
	h := []byte("{}")
	sb := binary.LittleEndian.AppendUint64(nil, uint64(len(h)))
	if err := os.WriteFile(st, append(sb, h...), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   []byte
		args []string
		says string
	}{
		{nil, []string{"--format", "wire"}, "empty"},
		{nil, []string{"--commit"}, "empty"},
		{nil, []string{"--format", "raw"}, "empty"},
		{nil, []string{"--format", "safetensors"}, "empty"},
		{hdrOnly.Bytes(), nil, "no tensor"},
		{hdrOnly.Bytes(), []string{"--format", "wire", "--commit"}, "no tensor"},
		{nil, []string{st}, "no tensor"},
		{nil, []string{"--shm", empty}, "empty"},
		{nil, []string{"--shm", "--format", "wire", empty}, "empty"},
	} {
		_, stderr, code := c.run(0, tc.in, "save", append([]string{"--iter", "1"}, tc.args...)...)
		if code != cli.ExitBadInput || !strings.Contains(stderr, tc.says) {
			t.Fatalf("save %v of %d bytes: exit %d, want 2 saying %q: %s", tc.args, len(tc.in), code, tc.says, stderr)
		}
	}
	if m, _, vs := c.status(0); m["committed"] != "-1" || len(vs) != 0 {
		t.Fatalf("after refused saves the agent holds %v (committed %s)", vs, m["committed"])
	}
	c.save(0, 1, shard(0, 1, small), "--commit")
	c.restore(0, shard(0, 1, small), 1, "from local memory")
}

// Defect 7: prune and persist that find the lock held say so and exit 75,
// which cron scripts can tell from success and failure.
func TestE2ELockHeldSkips(t *testing.T) {
	bin := clitest.Binary(t, "ckpt")
	dir := t.TempDir()
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	metrics := filepath.Join(t.TempDir(), "ckpt.prom")
	for _, args := range [][]string{
		{"prune", "--dir", dir, "--keep", "1"},
		{"persist", "--dir", dir, "--peers", "127.0.0.1:1", "--metrics", metrics},
	} {
		_, stderr, code := clitest.Run(t, exec.Command(bin, args...))
		if code != cli.ExitSkipped || !strings.Contains(stderr, "skipped") || !strings.Contains(stderr, "holds the lock") {
			t.Fatalf("%s with the lock held: exit %d, want %d: %s", args[0], code, cli.ExitSkipped, stderr)
		}
	}
	if _, err := os.Stat(metrics); !os.IsNotExist(err) {
		t.Fatalf("a skipped persist wrote the metrics file (%v): the lock holder writes it", err)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	_, stderr, code := clitest.Run(t, exec.Command(bin, "prune", "--dir", dir, "--keep", "1"))
	if code == cli.ExitSkipped {
		t.Fatalf("prune after the lock was released: exit %d: %s", code, stderr)
	}
}

// detect must not take raw bytes for a stream.
func TestDetect(t *testing.T) {
	var stream bytes.Buffer
	w := wire.NewWriter(&stream, "test")
	_ = w.Write(&wire.Dense{Name: "x", DType: "f32", Shape: []int64{1}, Data: make([]byte, 4)})
	_ = w.Close()
	st := binary.LittleEndian.AppendUint64(nil, 2)
	st = append(st, "{}"...)
	hdrPrefix := append([]byte(nil), stream.Bytes()[:12]...)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"stream", stream.Bytes(), "wire"},
		{"truncated stream", stream.Bytes()[:stream.Len()-3], "wire"},
		{"header prefix", hdrPrefix, "wire"},
		{"safetensors", st, "safetensors"},
		{"fixmap byte", append([]byte{0x85}, shard(0, 1, 64)...), "raw"},
		{"map16 byte", append([]byte{0xde}, shard(0, 2, 64)...), "raw"},
		{"map32 byte", append([]byte{0xdf}, shard(0, 3, 64)...), "raw"},
		{"map with key t", append([]byte("\x85\xa1t\xa3end"), shard(0, 4, 64)...), "raw"},
		{"empty", nil, "raw"},
	} {
		if got := detectBytes(tc.in); got != tc.want {
			t.Errorf("%s: detect says %s, want %s", tc.name, got, tc.want)
		}
	}
}
