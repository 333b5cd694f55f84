package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
	"trainwire.dev/tools/ckpt/internal/safetensors"
)

// These tests run real `ckpt agent` processes (one per rank) on loopback and
// drive them with real `ckpt save` / `ckpt restore` processes.

type cluster struct {
	t     *testing.T
	bin   string
	dir   string
	n     int
	addrs []string
	extra []string
	mu    sync.Mutex
	procs map[int]*exec.Cmd
	logs  map[int]*clitest.Buffer
	// machine, if set, gives rank r's TRAINWIRE_CKPT_MACHINE.
	machine map[int]string
	// per, if set, gives rank r's agent flags of its own.
	per func(r int) []string
}

func newCluster(t *testing.T, n int, extra ...string) *cluster {
	t.Helper()
	return newClusterPer(t, n, nil, extra...)
}

// newClusterPer is newCluster where rank r's agent also gets per(r).
func newClusterPer(t *testing.T, n int, per func(r int) []string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, bin: clitest.Binary(t, "ckpt"), dir: t.TempDir(), n: n, extra: extra, procs: map[int]*exec.Cmd{}, logs: map[int]*clitest.Buffer{}, machine: map[int]string{}, per: per}
	for r := 0; r < n; r++ {
		c.machine[r] = fmt.Sprintf("machine-%d", r)
	}
	for _, port := range clitest.FreePorts(t, n) {
		c.addrs = append(c.addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		for r, l := range c.logs {
			// With TRAINWIRE_BIN pointing at a -race build, a race fails the test.
			if strings.Contains(l.String(), "DATA RACE") {
				t.Errorf("agent %d: data race:\n%s", r, l)
			}
		}
		if t.Failed() {
			for r, l := range c.logs {
				t.Logf("agent %d log:\n%s", r, l)
			}
		}
	})
	for r := 0; r < n; r++ {
		c.start(r, nil)
	}
	return c
}

func (c *cluster) sock(r int) string { return filepath.Join(c.dir, fmt.Sprintf("agent%d.sock", r)) }

func (c *cluster) rankArgs(r int) []string {
	return []string{"--rank", strconv.Itoa(r), "--world", strconv.Itoa(c.n), "--run-id", "e2e", "--socket", c.sock(r)}
}

// start starts rank r's agent (peers: the addresses it dials; nil: the
// real ones) and waits until it answers.
func (c *cluster) start(r int, peers []string) {
	c.t.Helper()
	if peers == nil {
		peers = c.addrs
	}
	args := append([]string{"agent"}, c.rankArgs(r)...)
	args = append(args, "--peers", strings.Join(peers, ","), "--timeout", "5s", "--log-level", "debug")
	args = append(args, c.extra...)
	if c.per != nil {
		args = append(args, c.per(r)...)
	}
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(os.Environ(), "TRAINWIRE_TOKEN=e2e-token")
	c.mu.Lock()
	if m, ok := c.machine[r]; ok {
		cmd.Env = append(cmd.Env, "TRAINWIRE_CKPT_MACHINE="+m)
	}
	c.mu.Unlock()
	lb := &clitest.Buffer{}
	cmd.Stderr, cmd.Stdout = lb, lb
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.mu.Lock()
	c.procs[r], c.logs[r] = cmd, lb
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cl, err := agent.Dial(c.sock(r), 5*time.Second, wire.DefaultLimits)
		if err == nil {
			_, _, err = cl.Status()
			cl.Close()
			if err == nil {
				return
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("agent %d did not come up: %v\n%s", r, err, lb)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to rank r's agent.
func (c *cluster) kill(r int) {
	c.t.Helper()
	c.mu.Lock()
	p := c.procs[r]
	delete(c.procs, r)
	c.mu.Unlock()
	if err := p.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	_ = p.Wait()
}

func (c *cluster) log(r int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.logs[r].String()
}

// run runs a ckpt verb for rank r with stdin; it returns stdout, stderr and
// the exit code.
func (c *cluster) run(r int, stdin []byte, verb string, args ...string) ([]byte, string, int) {
	c.t.Helper()
	all := append(append([]string{verb}, c.rankArgs(r)...), args...)
	cmd := exec.Command(c.bin, all...)
	cmd.Stdin = bytes.NewReader(stdin)
	return clitest.Run(c.t, cmd)
}

func (c *cluster) save(r int, iter int64, data []byte, args ...string) {
	c.t.Helper()
	_, stderr, code := c.run(r, data, "save", append([]string{"--iter", strconv.FormatInt(iter, 10)}, args...)...)
	if code != 0 {
		c.t.Fatalf("rank %d save iteration %d: exit %d: %s", r, iter, code, stderr)
	}
}

// saveAll saves iteration iter on every live rank in parallel.
func (c *cluster) saveAll(iter int64, ranks []int, shard func(r int) []byte, args ...string) {
	c.t.Helper()
	var wg sync.WaitGroup
	errs := make([]string, c.n)
	for _, r := range ranks {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			_, stderr, code := c.run(r, shard(r), "save", append([]string{"--iter", strconv.FormatInt(iter, 10)}, args...)...)
			if code != 0 {
				errs[r] = fmt.Sprintf("rank %d: exit %d: %s", r, code, stderr)
			}
		}(r)
	}
	wg.Wait()
	var failed []string
	for _, e := range errs {
		if e != "" {
			failed = append(failed, e)
		}
	}
	if len(failed) > 0 {
		c.t.Fatal(strings.Join(failed, "\n"))
	}
}

func (c *cluster) client(r int) *agent.Client {
	c.t.Helper()
	cl, err := agent.Dial(c.sock(r), 60*time.Second, wire.DefaultLimits)
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

func (c *cluster) waitCommitted(r int, iter int64) {
	c.t.Helper()
	cl := c.client(r)
	defer cl.Close()
	if _, err := cl.Wait(iter, 60*time.Second); err != nil {
		c.t.Fatalf("rank %d: iteration %d not committed: %v", r, iter, err)
	}
}

func (c *cluster) status(r int) (map[string]string, map[string]float64, []*wire.Stats) {
	c.t.Helper()
	cl := c.client(r)
	defer cl.Close()
	m, frames, err := cl.Status()
	if err != nil {
		c.t.Fatal(err)
	}
	var counters map[string]float64
	var versions []*wire.Stats
	for _, f := range frames {
		if s, ok := f.(*wire.Stats); ok {
			if s.Name == "counters" {
				counters = s.Values
			} else {
				versions = append(versions, s)
			}
		}
	}
	return m, counters, versions
}

// restore restores the latest committed iteration on rank r and checks it
// equals want and came from where.
func (c *cluster) restore(r int, want []byte, wantIter int64, where string, args ...string) {
	c.t.Helper()
	out, stderr, code := c.run(r, nil, "restore", args...)
	if code != 0 {
		c.t.Fatalf("rank %d restore: exit %d: %s", r, code, stderr)
	}
	if !bytes.Equal(out, want) {
		c.t.Fatalf("rank %d restored %d bytes that differ from iteration %d's %d bytes (%s)", r, len(out), wantIter, len(want), stderr)
	}
	if !strings.Contains(stderr, fmt.Sprintf("restored iteration %d ", wantIter)) || !strings.Contains(stderr, where) {
		c.t.Fatalf("rank %d: restore says %q, want iteration %d from %q", r, stderr, wantIter, where)
	}
}

// restoreReplacement restores rank r's replacement agent, which must give
// want (iteration iter) from a peer's memory: fetched by the restore, or by
// the agent itself when it started (it then says so in its log and the
// restore reads local memory).
//
// With "--shm", the restore goes through shared memory into a file.
func (c *cluster) restoreReplacement(r int, want []byte, iter int64, args ...string) {
	c.t.Helper()
	var out []byte
	var stderr string
	var code int
	if len(args) > 0 && args[0] == "--shm" {
		file := filepath.Join(c.dir, fmt.Sprintf("restored-%d", r))
		_, stderr, code = c.run(r, nil, "restore", "--shm", "-o", file)
		out, _ = os.ReadFile(file)
	} else {
		out, stderr, code = c.run(r, nil, "restore")
	}
	if code != 0 || !bytes.Equal(out, want) || !strings.Contains(stderr, fmt.Sprintf("restored iteration %d ", iter)) {
		c.t.Fatalf("rank %d's replacement: restore exit %d, %d bytes (want iteration %d, %d bytes): %s", r, code, len(out), iter, len(want), stderr)
	}
	if !strings.Contains(stderr, "from peer memory") && !strings.Contains(c.log(r), "fetched a shard this agent holds from a peer") {
		c.t.Fatalf("rank %d's replacement did not get iteration %d from a peer: %s", r, iter, stderr)
	}
}

func shard(r int, iter int64, size int) []byte {
	b := make([]byte, size)
	rng := rand.New(rand.NewPCG(uint64(r), uint64(iter)))
	for i := 0; i+8 <= len(b); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func allRanks(n int) []int {
	var out []int
	for r := 0; r < n; r++ {
		out = append(out, r)
	}
	return out
}

// waitFor polls cond until it holds or 60 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// C-RP-1/C-RP-6/C-RC-1 on a mixed placement (N=3, m=2: a ring), every
// input path: raw bytes, tensor frames, safetensors, shared memory.
func TestE2EFormats(t *testing.T) {
	c := newCluster(t, 3, "--m", "2", "--buffer", "1MiB", "--parts", "4")
	// Raw bytes.
	c.saveAll(1, allRanks(3), func(r int) []byte { return shard(r, 1, 3<<20+5) }, "--format", "raw")
	c.waitCommitted(0, 1)
	for r := 0; r < 3; r++ {
		c.restore(r, shard(r, 1, 3<<20+5), 1, "from local memory")
	}
	// The ring: rank 2's shard is on rank 0 (3 → 1 in 1-based IDs).
	_, _, vs := c.status(0)
	found := false
	for _, v := range vs {
		if v.Rank == 2 && v.Step == 1 && v.Labels["state"] == "complete" {
			found = true
		}
	}
	if !found {
		t.Fatalf("rank 0 holds no complete copy of rank 2's shard (ring 3→1): %+v", vs)
	}

	// Tensor frames in, frames out.
	frames := func(r int) []byte {
		var b bytes.Buffer
		w := wire.NewWriter(&b, "test")
		for i := 0; i < 3; i++ {
			x := make([]float32, 1000+i)
			for j := range x {
				x[j] = float32(r*1000000 + i*1000 + j)
			}
			d := wire.NewDenseF32(fmt.Sprintf("layer%d.weight", i), x, int64(len(x)))
			d.Step, d.Rank = 2, int64(r)
			if err := w.Write(d); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	c.saveAll(2, allRanks(3), frames)
	c.waitCommitted(1, 2)
	out, stderr, code := c.run(1, nil, "restore", "--format", "frames")
	if code != 0 {
		t.Fatalf("restore frames: %s", stderr)
	}
	r := wire.NewReader(bytes.NewReader(out), wire.DefaultLimits)
	n := 0
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		d := f.(*wire.Dense)
		x, _ := d.F32()
		if d.Name != fmt.Sprintf("layer%d.weight", n) || len(x) != 1000+n || x[5] != float32(1000000+n*1000+5) {
			t.Fatalf("restored frame %d: %s %d elements, x[5]=%g", n, d.Name, len(x), x[5])
		}
		n++
	}
	if n != 3 {
		t.Fatalf("restored %d frames, want 3", n)
	}
	if _, err := c.client(1).Restore(-1, "frames", nil, wire.NewWriter(io.Discard, "t"), nil); err != nil {
		t.Fatal(err)
	}

	// Safetensors.
	st := func(r int) []byte {
		hdr := `{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`
		b := make([]byte, 8, 8+len(hdr)+16)
		b[0] = byte(len(hdr))
		b = append(b, hdr...)
		return append(b, shard(r, 3, 16)...)
	}
	c.saveAll(3, allRanks(3), st)
	c.waitCommitted(2, 3)
	c.restore(2, st(2), 3, "from local memory")
	// Tensors saved as frames come back as safetensors, and safetensors as frames.
	if out, stderr, code := c.run(1, nil, "restore", "--iter", "2", "--format", "safetensors"); code != 0 {
		t.Fatalf("restore --format safetensors: %s", stderr)
	} else if _, err := safetensors.Parse(out); err != nil || !bytes.Contains(out, []byte("layer2.weight")) {
		t.Fatalf("restored safetensors: %v", err)
	}
	if out, stderr, code := c.run(2, nil, "restore", "--format", "frames"); code != 0 {
		t.Fatalf("restore --format frames of a safetensors shard: %s", stderr)
	} else if r := wire.NewReader(bytes.NewReader(out), wire.DefaultLimits); true {
		f, err := r.Next()
		if err != nil || f.(*wire.Dense).Name != "w" || !bytes.Equal(f.(*wire.Dense).Data, shard(2, 3, 16)) {
			t.Fatalf("safetensors shard as frames: %v %+v", err, f)
		}
	}
	// A broken safetensors file is refused as bad input.
	bad := st(0)
	bad[0] = 200
	if _, stderr, code := c.run(0, bad, "save", "--iter", "4", "--format", "safetensors"); code != 2 || !strings.Contains(stderr, "safetensors") {
		t.Fatalf("broken safetensors: exit %d: %s", code, stderr)
	}

	// Shared memory: begin, fill, commit; restore through shared memory.
	for r := 0; r < 3; r++ {
		cl := c.client(r)
		want := shard(r, 5, 2<<20)
		if _, err := cl.SaveShm(5, int64(len(want)), "raw", -1, func(b []byte) error { copy(b, want); return nil }); err != nil {
			t.Fatalf("rank %d shm save: %v", r, err)
		}
		cl.Close()
	}
	c.waitCommitted(0, 5)
	file := filepath.Join(c.dir, "restored")
	if _, stderr, code := c.run(1, nil, "restore", "--shm", "-o", file); code != 0 {
		t.Fatalf("shm restore: %s", stderr)
	}
	got, _ := os.ReadFile(file)
	if !bytes.Equal(got, shard(1, 5, 2<<20)) {
		t.Fatal("shm restore differs")
	}
	// --shm save of a file the trainer wrote.
	src := filepath.Join(c.dir, "state")
	for r := 0; r < 3; r++ {
		_ = os.WriteFile(src+strconv.Itoa(r), shard(r, 6, 1<<20), 0o600)
	}
	var wg sync.WaitGroup
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			if _, stderr, code := c.run(r, nil, "save", "--iter", "6", "--shm", "--commit", src+strconv.Itoa(r)); code != 0 {
				t.Errorf("rank %d save --shm: %s", r, stderr)
			}
		}(r)
	}
	wg.Wait()
	c.restore(0, shard(0, 6, 1<<20), 6, "from local memory")
	// An older committed iteration is still restorable by number while the
	// slot keeps it (two versions: 5 and 6).
	c.restore(0, shard(0, 5, 2<<20), 5, "from local memory", "--iter", "5")
	if _, stderr, code := c.run(0, nil, "restore", "--iter", "7"); code == 0 || !strings.Contains(stderr, "not committed") {
		t.Fatalf("restore of an uncommitted iteration: exit %d: %s", code, stderr)
	}
}

const (
	small    = 1 << 20
	bigShard = 12 << 20
)

// paced starts a cluster of 4 (m=2: groups {0,1}, {2,3}) whose replication
// is slow enough (8 MB/s per agent) to kill an agent mid-way, with
// iteration 1 (small) committed everywhere and iteration 2 (big) saved
// locally and replicating.
func paced(t *testing.T) *cluster {
	c := newCluster(t, 4, "--m", "2", "--buffer", "1MiB", "--parts", "4", "--pace", "8MB")
	c.saveAll(1, allRanks(4), func(r int) []byte { return shard(r, 1, small) })
	for r := 0; r < 4; r++ {
		c.waitCommitted(r, 1)
	}
	c.saveAll(2, allRanks(4), func(r int) []byte { return shard(r, 2, bigShard) })
	return c
}

// midway waits until rank r has received part, not all, of a peer's
// iteration-2 replica.
func midway(t *testing.T, c *cluster, r int) {
	waitFor(t, fmt.Sprintf("rank %d to be mid-replication", r), func() bool {
		_, cnt, _ := c.status(r)
		got := cnt["bytes_received"] - small
		return got >= 2<<20 && got < bigShard
	})
}

// C-RC-5 (a): kill -9 a receiver mid-replication.
func TestE2EKillReceiver(t *testing.T) {
	c := paced(t)
	midway(t, c, 1)
	c.kill(1) // rank 0's receiver
	// Rank 0's replication fails (it sees the dead receiver before any
	// restore below rolls the job back, which would abandon the iteration
	// instead: the restores wait for it); iteration 2 is never committed.
	// Every survivor restores iteration 1 from its own memory.
	waitFor(t, "rank 0's log to say its replication failed", func() bool { return strings.Contains(c.log(0), "replication failed") })
	for _, r := range []int{0, 2, 3} {
		c.restore(r, shard(r, 1, small), 1, "from local memory")
	}
	if _, stderr, code := c.run(2, nil, "restore", "--iter", "2"); code == 0 || !strings.Contains(stderr, "not committed") {
		t.Fatalf("iteration 2 restorable after its replication failed: exit %d: %s", code, stderr)
	}
	// A replacement agent takes rank 1 and gets its shard from rank 0,
	// through shared memory (a streamed restore).
	c.start(1, nil)
	c.restoreReplacement(1, shard(1, 1, small), 1, "--shm")
	// The replacement kept what it fetched: the next restore is local.
	c.restore(1, shard(1, 1, small), 1, "from local memory")
}

// C-RC-5 (b): kill -9 a sender mid-send.
func TestE2EKillSender(t *testing.T) {
	c := paced(t)
	midway(t, c, 1)
	c.kill(0) // rank 1's sender
	c.restore(1, shard(1, 1, small), 1, "from local memory")
	// Rank 1 discarded the in-progress copy of rank 0's iteration 2 and
	// kept its complete copy of iteration 1.
	waitFor(t, "rank 1 to discard the partial replica", func() bool {
		_, _, vs := c.status(1)
		var failed, kept bool
		for _, v := range vs {
			if v.Rank == 0 && v.Step == 2 {
				failed = v.Labels["state"] == "failed"
			}
			if v.Rank == 0 && v.Step == 1 {
				kept = v.Labels["state"] == "complete"
			}
		}
		return failed && kept
	})
	c.start(0, nil)
	c.restoreReplacement(0, shard(0, 1, small), 1)
	for _, r := range []int{2, 3} {
		c.restore(r, shard(r, 1, small), 1, "from local memory")
	}
}

// C-RC-5 (c) / C-RC-4: both members of a group die: no rank restores from
// memory, and all say the same.
func TestE2EKillGroup(t *testing.T) {
	c := newCluster(t, 4, "--m", "2", "--buffer", "1MiB")
	c.saveAll(1, allRanks(4), func(r int) []byte { return shard(r, 1, small) })
	for r := 0; r < 4; r++ {
		c.waitCommitted(r, 1)
	}
	c.kill(0)
	c.kill(1)
	var msgs []string
	for _, r := range []int{2, 3} {
		out, stderr, code := c.run(r, nil, "restore")
		if code != 3 || len(out) != 0 {
			t.Fatalf("rank %d: exit %d with %d bytes, want exit 3 and nothing: %s", r, code, len(out), stderr)
		}
		for _, want := range []string{"iteration 1 cannot be recovered from CPU memory", "rank 0", "rank 1", "persistent storage: none is configured"} {
			if !strings.Contains(stderr, want) {
				t.Fatalf("rank %d: %q does not say %q", r, stderr, want)
			}
		}
		msgs = append(msgs, stderr[strings.Index(stderr, "iteration"):strings.Index(stderr, "unreachable")])
	}
	if msgs[0] != msgs[1] {
		t.Fatalf("ranks disagree: %q vs %q", msgs[0], msgs[1])
	}
}

// corrupter forwards TCP to target and flips one byte at offset at of the
// client→server direction of each connection (mode 1: only the first such
// connection; 2: all).
type corrupter struct {
	l       net.Listener
	target  string
	at      int64
	mode    atomic.Int32
	flipped atomic.Int32
}

func newCorrupter(t *testing.T, target string, at int64) *corrupter {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &corrupter{l: l, target: target, at: at}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(in)
		}
	}()
	return p
}

func (p *corrupter) serve(in net.Conn) {
	out, err := net.Dial("tcp", p.target)
	if err != nil {
		in.Close()
		return
	}
	go func() { _, _ = io.Copy(in, out); in.Close() }()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		k, err := in.Read(buf)
		if k > 0 {
			if n <= p.at && p.at < n+int64(k) {
				m := p.mode.Load()
				if m == 2 || (m == 1 && p.flipped.Load() == 0) {
					buf[p.at-n] ^= 0x40
					p.flipped.Add(1)
				}
			}
			n += int64(k)
			if _, werr := out.Write(buf[:k]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	out.Close()
}

// C-RC-5 (e): a corrupted chunk on the wire is caught by its CRC32C: the
// replica is never marked complete; a retry re-sends it.
func TestE2ECorruptChunk(t *testing.T) {
	c := &cluster{t: t, bin: clitest.Binary(t, "ckpt"), dir: t.TempDir(), n: 2, extra: []string{"--m", "2", "--buffer", "1MiB", "--retries", "1"},
		procs: map[int]*exec.Cmd{}, logs: map[int]*clitest.Buffer{}}
	t.Cleanup(func() {
		for _, p := range c.procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
		if t.Failed() {
			for r, l := range c.logs {
				t.Logf("agent %d log:\n%s", r, l)
			}
		}
	})
	for _, port := range clitest.FreePorts(t, 2) {
		c.addrs = append(c.addrs, fmt.Sprintf("127.0.0.1:%d", port))
	}
	// Rank 0 reaches rank 1 through the corrupter; 200 KB in is inside the
	// first chunk's payload (chunks are 256 KiB).
	proxy := newCorrupter(t, c.addrs[1], 200_000)
	proxy.mode.Store(1)
	c.start(1, nil)
	c.start(0, []string{c.addrs[0], proxy.l.Addr().String()})

	c.saveAll(1, allRanks(2), func(r int) []byte { return shard(r, 1, small) })
	c.waitCommitted(0, 1)
	if proxy.flipped.Load() != 1 {
		t.Fatalf("the proxy flipped %d bytes, want 1", proxy.flipped.Load())
	}
	_, cnt, _ := c.status(1)
	if cnt["crc_failures"] < 1 {
		t.Fatalf("rank 1 saw no CRC failure: %v", cnt)
	}
	if !strings.Contains(c.log(1), "CRC32C mismatch") {
		t.Fatalf("rank 1's log does not name the CRC mismatch:\n%s", c.log(1))
	}
	// Every retry corrupted: iteration 2 is never committed, never complete
	// on rank 1.
	proxy.mode.Store(2)
	c.saveAll(2, allRanks(2), func(r int) []byte { return shard(r, 2, small) })
	cl := c.client(0)
	_, err := cl.Wait(2, 30*time.Second)
	cl.Close()
	if err == nil || !strings.Contains(err.Error(), "will not be committed") {
		t.Fatalf("iteration 2 with every chunk stream corrupted: %v", err)
	}
	_, _, vs := c.status(1)
	for _, v := range vs {
		if v.Rank == 0 && v.Step == 2 && v.Labels["state"] == "complete" {
			t.Fatal("a corrupted replica is marked complete")
		}
	}
	c.restore(1, shard(1, 1, small), 1, "from local memory")
	// Rank 0 dies: its replacement gets the good iteration-1 copy that the
	// retry delivered to rank 1.
	c.kill(0)
	c.start(0, []string{c.addrs[0], c.addrs[1]})
	c.restoreReplacement(0, shard(0, 1, small), 1)
}

// A trainer sending garbage, a shard over --memory and a peer without the
// token are refused, and the committed checkpoint survives each.
func TestE2ERefusals(t *testing.T) {
	c := newCluster(t, 2, "--m", "2", "--memory", "6MiB", "--buffer", "1MiB")
	c.saveAll(1, allRanks(2), func(r int) []byte { return shard(r, 1, small) })
	c.waitCommitted(0, 1)

	// Garbage on the trainer socket.
	cl := c.client(0)
	if err := cl.SendRaw([]byte("\x93\x01\x02\x03 this is not a trainwire stream")); err != nil {
		t.Fatal(err)
	}
	_, err := cl.Recv()
	var re *agent.RemoteError
	if !errors.As(err, &re) || re.Code != "bad_input" {
		t.Fatalf("garbage: %v", err)
	}
	cl.Close()
	// Truncated stream from `ckpt save`.
	var b bytes.Buffer
	w := wire.NewWriter(&b, "t")
	_ = w.Write(wire.NewDenseF32("x", make([]float32, 100), 100))
	_ = w.Flush()
	if _, stderr, code := c.run(0, b.Bytes(), "save", "--iter", "2"); code == 0 || !strings.Contains(stderr, "truncated") {
		t.Fatalf("truncated stream: exit %d: %s", code, stderr)
	}
	// A shard larger than --memory.
	if _, stderr, code := c.run(0, shard(0, 3, 8<<20), "save", "--iter", "3", "--format", "raw"); code == 0 || !strings.Contains(stderr, "--memory") {
		t.Fatalf("oversized shard: exit %d: %s", code, stderr)
	}
	// A peer without the token.
	conn, err := net.Dial("tcp", c.addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	_, err = mesh.AuthClient(conn, []byte("not-the-token"), mesh.AuthHello{Kind: "ckpt", Run: "e2e", From: 1, To: 0, World: 2}, time.Now().Add(10*time.Second))
	conn.Close()
	if !errors.Is(err, mesh.ErrAuth) {
		t.Fatalf("a peer without the token: %v", err)
	}
	waitFor(t, "rank 0 to log the refusal", func() bool { return strings.Contains(c.log(0), "refused a peer connection") })
	// Nothing committed was lost.
	for r := 0; r < 2; r++ {
		c.restore(r, shard(r, 1, small), 1, "from local memory")
	}
	// And the agents still work.
	c.saveAll(4, allRanks(2), func(r int) []byte { return shard(r, 4, small) })
	c.waitCommitted(1, 4)
	c.restore(1, shard(1, 4, small), 4, "from local memory")
}

// TestE2EAgentStopsWithIdleTrainer: SIGINT stops an agent whose trainer is
// connected and idle (and whose shard a live writer holds) by itself, not
// by the watchdog at the end of its grace, and it exits 130.
func TestE2EAgentStopsWithIdleTrainer(t *testing.T) {
	c := newCluster(t, 1, "--m", "1")
	cl := c.client(0)
	defer cl.Close()
	_, err := cl.SaveShm(1, 4096, agent.FormatRaw, 10*time.Second, func(b []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	p := c.procs[0]
	delete(c.procs, 0)
	c.mu.Unlock()
	t0 := time.Now()
	if err := p.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	code := clitest.ExitCode(p.Wait())
	t.Logf("stopped %v after the signal", time.Since(t0))
	if log := c.log(0); strings.Contains(log, "had not finished") {
		t.Fatalf("the agent did not stop by itself:\n%s", log)
	}
	if code != 130 {
		t.Fatalf("the agent exited %d after SIGINT, want 130:\n%s", code, c.log(0))
	}
}
