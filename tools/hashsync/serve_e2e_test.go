package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/shm"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// sidecars are `hashsync serve` ranks and a Go client per rank.
type sidecars struct {
	procs   []*clitest.Proc
	clients []*serve.Client
	segs    []*shm.Segment
}

// torchrunEnv is the variable set torchrun gives rank r of world ranks on
// one node.
func torchrunEnv(r, world, port int, socket string) []string {
	return []string{
		fmt.Sprintf("RANK=%d", r), fmt.Sprintf("WORLD_SIZE=%d", world), fmt.Sprintf("LOCAL_RANK=%d", r),
		fmt.Sprintf("LOCAL_WORLD_SIZE=%d", world), "GROUP_RANK=0", "GROUP_WORLD_SIZE=1", "ROLE_RANK=" + fmt.Sprint(r),
		"MASTER_ADDR=127.0.0.1", fmt.Sprintf("MASTER_PORT=%d", port), "TORCHELASTIC_RUN_ID=serve-e2e",
		"TRAINWIRE_SERVE_SOCKET=" + socket, "TRAINWIRE_TOKEN=serve-e2e",
	}
}

// startSidecars starts world sidecars under torchrun's variables, each
// with a client and a 1 MiB segment attached as segment 0.
func startSidecars(t *testing.T, ctx context.Context, world int, args ...string) *sidecars {
	t.Helper()
	bin := clitest.Binary(t, "hashsync")
	dir := t.TempDir()
	port := clitest.FreeLauncherPort(t)
	sc := &sidecars{}
	for r := range world {
		sock := filepath.Join(dir, fmt.Sprintf("r%d.sock", r))
		sc.procs = append(sc.procs, clitest.Start(t, ctx, bin, torchrunEnv(r, world, port, sock), nil, append([]string{"serve"}, args...)...))
	}
	for r := range world {
		sc.connect(t, ctx, filepath.Join(dir, fmt.Sprintf("r%d.sock", r)), r)
	}
	return sc
}

// connect dials a sidecar's socket once it exists and attaches a segment.
func (sc *sidecars) connect(t *testing.T, ctx context.Context, path string, r int) {
	t.Helper()
	var c *serve.Client
	for {
		var err error
		if c, err = serve.Dial(path); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("rank %d: no socket at %s: %v; stderr: %s", r, path, err, sc.procs[r].Stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Cleanup(func() { c.Close() })
	seg, err := shm.Create(fmt.Sprintf("rank%d", r), 8<<20, true)
	require.NoError(t, err)
	t.Cleanup(func() { seg.Close() })
	_, err = c.Attach(seg, 0)
	require.NoError(t, err, "rank %d attach", r)
	sc.clients = append(sc.clients, c)
	sc.segs = append(sc.segs, seg)
}

// values is rank r's tensor k: small integers (exact sums in any order),
// with zero rows so that the sparse schemes have rows to leave out.
func values(r, k, n int) []float32 {
	f := make([]float32, n)
	for i := range f {
		if (i/4+r+k)%3 != 0 {
			f[i] = float32((i*7+r*13+k)%17) - 8
		}
	}
	return f
}

// request is step s: tensor "a" (n floats at off 0 of the segment),
// tensor "b" (n floats after it) and a small inline tensor "c".
func request(r, s, n int, seg *shm.Segment) *serve.Request {
	a, b := values(r, 3*s, n), values(r, 3*s+1, n)
	copy(seg.Bytes(), tensor.Bytes(a))
	copy(seg.Bytes()[4*n:], tensor.Bytes(b))
	shape := []int64{int64(n / 4), 4}
	return &serve.Request{Op: serve.OpSync, Step: int64(s), Tensors: []serve.Tensor{
		{Name: "a", DType: wire.F32, Shape: shape, Seg: 0, Off: 0, Len: int64(4 * n)},
		{Name: "b", DType: wire.F32, Shape: shape, Seg: 0, Off: int64(4 * n), Len: int64(4 * n)},
		{Name: "c", DType: wire.F32, Shape: []int64{8}, Inline: true, Data: tensor.Bytes(values(r, 3*s+2, 8))},
	}}
}

// exactSum is tensor k summed over world ranks.
func exactSum(world, k, n int) []float32 {
	sum := make([]float32, n)
	for r := range world {
		tensor.Add(sum, values(r, k, n))
	}
	return sum
}

// Four sidecars under torchrun's variables sum every tensor exactly, in
// place in each client's shared memory, for the dense ring allreduce and
// for zen; the clients disconnect and every sidecar exits 0.
func TestServeFourRanksSharedMemory(t *testing.T) {
	for _, sch := range []string{"dense", "zen"} {
		t.Run(sch, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const world, n = 4, 1 << 16
			sc := startSidecars(t, ctx, world, "--scheme", sch, "--timeout", "20s")
			for s := range 3 {
				chs := make([]<-chan *serve.Reply, world)
				for r := range world {
					var err error
					_, chs[r], err = sc.clients[r].Go(request(r, s, n, sc.segs[r]), -1)
					require.NoError(t, err)
				}
				for r := range world {
					rep := clitest.Recv(t, ctx, chs[r], fmt.Sprintf("rank %d step %d", r, s))
					require.True(t, rep.OK, "rank %d step %d: %s; stderr: %s", r, s, rep.Error, sc.procs[r].Stderr.String())
					got := tensor.Float32s(append([]byte(nil), sc.segs[r].Bytes()[:8*n]...))
					require.Equal(t, exactSum(world, 3*s, n), got[:n], "rank %d step %d tensor a", r, s)
					require.Equal(t, exactSum(world, 3*s+1, n), got[n:], "rank %d step %d tensor b", r, s)
					require.Equal(t, exactSum(world, 3*s+2, 8), tensor.Float32s(append([]byte(nil), rep.Data[2]...)), "rank %d step %d inline c", r, s)
					require.Empty(t, rep.Data[0])
				}
			}
			for r, c := range sc.clients {
				require.NoError(t, c.Close())
				require.NoError(t, sc.procs[r].Cmd.Wait(), "rank %d: %s", r, sc.procs[r].Stderr.String())
			}
		})
	}
}

// Sixteen requests in flight at once on every rank are all answered,
// each with its own step's average.
func TestServeRequestsInFlight(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, k = 2, 16
	sc := startSidecars(t, ctx, world, "--scheme", "dense")
	chs := make([][]<-chan *serve.Reply, world)
	for s := range k {
		for r := range world {
			_, ch, err := sc.clients[r].Go(&serve.Request{Op: serve.OpSync, Step: int64(s), Average: true, Tensors: []serve.Tensor{
				{Name: "x", DType: wire.F32, Shape: []int64{64}, Inline: true, Data: tensor.Bytes(values(r, s, 64))}}}, -1)
			require.NoError(t, err)
			chs[r] = append(chs[r], ch)
		}
	}
	for r := range world {
		for s, ch := range chs[r] {
			rep := clitest.Recv(t, ctx, ch, fmt.Sprintf("rank %d step %d", r, s))
			require.True(t, rep.OK, "rank %d step %d: %s", r, s, rep.Error)
			want := exactSum(world, s, 64)
			tensor.Scale(want, 1/float32(world))
			require.Equal(t, want, tensor.Float32s(append([]byte(nil), rep.Data[0]...)), "rank %d step %d", r, s)
		}
	}
}

// A rank killed with SIGKILL, or stopped with SIGSTOP (silent), while the
// others' requests wait for it: their requests fail with an error naming
// it, within the mesh deadline, and their sidecars exit 3.
func TestServeDeadOrSilentRank(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		t.Run(sig.String(), func(t *testing.T) { deadRank(t, sig) })
	}
}

func deadRank(t *testing.T, sig syscall.Signal) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, victim, n = 4, 2, 1 << 10
	sc := startSidecars(t, ctx, world, "--scheme", "dense", "--timeout", "4s")
	chs := map[int]<-chan *serve.Reply{}
	for r := range world {
		if r != victim {
			_, ch, err := sc.clients[r].Go(request(r, 0, n, sc.segs[r]), -1)
			require.NoError(t, err)
			chs[r] = ch
		}
	}
	// Ping the victim: its sidecar is up and serving, the others wait in
	// the agreement for its request, which never comes.
	_, err := sc.clients[victim].Do(&serve.Request{Op: serve.OpPing})
	require.NoError(t, err)
	require.NoError(t, sc.procs[victim].Cmd.Process.Signal(sig))
	defer sc.procs[victim].Cmd.Process.Signal(syscall.SIGKILL)
	for r, ch := range chs {
		rep := clitest.Recv(t, ctx, ch, fmt.Sprintf("rank %d", r))
		assert.False(t, rep.OK, "rank %d", r)
		assert.Equal(t, serve.CodePeer, rep.Code, "rank %d: %s", r, rep.Error)
		assert.Equal(t, int64(victim), rep.Rank, "rank %d: %s", r, rep.Error)
		assert.Contains(t, rep.Error, "rank 2", "rank %d", r)
		assert.Equal(t, 3, clitest.ExitCode(sc.procs[r].Cmd.Wait()), "rank %d: %s", r, sc.procs[r].Stderr.String())
	}
}

// A client that disconnects while its request waits for the other ranks:
// its sidecar exits 0 and the others fail naming its rank.
func TestServeClientDisconnectsMidRequest(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, quitter, n = 4, 1, 1 << 10
	sc := startSidecars(t, ctx, world, "--scheme", "dense", "--timeout", "10s")
	_, _, err := sc.clients[quitter].Go(request(quitter, 0, n, sc.segs[quitter]), -1)
	require.NoError(t, err)
	// The others have not asked: the request is pending in the agreement.
	// Ping first so that the request has surely been read.
	_, err = sc.clients[quitter].Do(&serve.Request{Op: serve.OpPing})
	require.NoError(t, err)
	require.NoError(t, sc.clients[quitter].Close())
	err = sc.procs[quitter].Cmd.Wait()
	require.NoError(t, err, "the quitter's sidecar: %s", sc.procs[quitter].Stderr.String())
	for r := range world {
		if r == quitter {
			continue
		}
		code := clitest.ExitCode(sc.procs[r].Cmd.Wait())
		stderr := sc.procs[r].Stderr.String()
		assert.Equal(t, 3, code, "rank %d: %s", r, stderr)
		assert.Contains(t, stderr, "rank 1", "rank %d", r)
		assert.Contains(t, stderr, "client disconnected", "rank %d", r)
		// Its client learns it too: a request now fails or finds the socket closed.
		_, err := sc.clients[r].Do(&serve.Request{Op: serve.OpPing})
		assert.Error(t, err, "rank %d", r)
	}
}

// Four sidecars under a real mpirun, each rank's socket named by {rank}.
func TestServeUnderMpirun(t *testing.T) {
	if _, err := os.Stat("/usr/bin/mpirun"); err != nil {
		t.Skip("mpirun not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	bin := clitest.Binary(t, "hashsync")
	dir := t.TempDir()
	port := clitest.FreePort(t)
	p := clitest.Start(t, ctx, "/usr/bin/mpirun", nil, nil, "--allow-run-as-root", "--oversubscribe", "-np", "4",
		"-x", fmt.Sprintf("TRAINWIRE_MASTER_PORT=%d", port), "-x", "TRAINWIRE_SERVE_SOCKET="+filepath.Join(dir, "s{rank}.sock"),
		bin, "serve", "--scheme", "dense")
	sc := &sidecars{procs: []*clitest.Proc{p, p, p, p}}
	const n = 1 << 12
	for r := range 4 {
		sc.connect(t, ctx, filepath.Join(dir, fmt.Sprintf("s%d.sock", r)), r)
	}
	chs := make([]<-chan *serve.Reply, 4)
	for r := range 4 {
		var err error
		_, chs[r], err = sc.clients[r].Go(request(r, 0, n, sc.segs[r]), -1)
		require.NoError(t, err)
	}
	for r := range 4 {
		rep := clitest.Recv(t, ctx, chs[r], fmt.Sprintf("rank %d", r))
		require.True(t, rep.OK, "rank %d: %s; %s", r, rep.Error, p.Stderr.String())
		got := tensor.Float32s(append([]byte(nil), sc.segs[r].Bytes()[:4*n]...))
		require.Equal(t, exactSum(4, 0, n), got, "rank %d", r)
	}
	for _, c := range sc.clients {
		require.NoError(t, c.Close())
	}
	err := p.Cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		t.Fatalf("mpirun: %v: %s", err, p.Stderr.String())
	}
	require.NoError(t, err)
}

// A request one rank refuses (a range outside its segment) fails on every
// rank, naming that rank and field, and every sidecar keeps serving.
func TestServeRefusedRequestFailsEveryRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, bad, n = 3, 1, 1 << 10
	sc := startSidecars(t, ctx, world, "--scheme", "dense")
	chs := make([]<-chan *serve.Reply, world)
	for r := range world {
		req := request(r, 0, n, sc.segs[r])
		if r == bad {
			req.Tensors[1].Off = sc.segs[r].Size() - 4
		}
		var err error
		_, chs[r], err = sc.clients[r].Go(req, -1)
		require.NoError(t, err)
	}
	for r := range world {
		rep := clitest.Recv(t, ctx, chs[r], fmt.Sprintf("rank %d", r))
		require.False(t, rep.OK, "rank %d", r)
		if r == bad {
			assert.Equal(t, serve.CodeBadRequest, rep.Code, rep.Error)
			assert.Equal(t, "tensors[1].off", rep.Field, rep.Error)
		} else {
			assert.Equal(t, serve.CodeRejected, rep.Code, rep.Error)
			assert.Equal(t, int64(bad), rep.Rank, rep.Error)
			assert.Contains(t, rep.Error, "tensors[1].off", rep.Error)
		}
	}
	for r := range world {
		var err error
		_, chs[r], err = sc.clients[r].Go(request(r, 1, n, sc.segs[r]), -1)
		require.NoError(t, err)
	}
	for r := range world {
		rep := clitest.Recv(t, ctx, chs[r], fmt.Sprintf("rank %d", r))
		require.True(t, rep.OK, "rank %d: %s", r, rep.Error)
	}
}

// SIGTERM ends a sidecar with 143, SIGINT with 130.
func TestServeSignals(t *testing.T) {
	for sig, want := range map[syscall.Signal]int{syscall.SIGTERM: 143, syscall.SIGINT: 130} {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		sc := startSidecars(t, ctx, 1, "--scheme", "dense")
		_, err := sc.clients[0].Do(&serve.Request{Op: serve.OpPing})
		require.NoError(t, err)
		require.NoError(t, sc.procs[0].Cmd.Process.Signal(sig))
		assert.Equal(t, want, clitest.ExitCode(sc.procs[0].Cmd.Wait()), "%v: %s", sig, sc.procs[0].Stderr.String())
		cancel()
	}
}

// The Python client of docs/serve.md runs against a real sidecar.
func TestServePythonExample(t *testing.T) {
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import msgpack").Run(); err != nil {
		t.Skip("python3 with msgpack not installed")
	}
	doc, err := os.ReadFile("../../docs/serve.md")
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(doc), "```python\n")
	require.True(t, ok, "no python block in docs/serve.md")
	code, _, _ := strings.Cut(rest, "```")
	require.LessOrEqual(t, strings.Count(code, "\n"), 20, "the example is at most 20 lines")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bin := clitest.Binary(t, "hashsync")
	sock := filepath.Join(t.TempDir(), "s.sock")
	p := clitest.Start(t, ctx, bin, nil, nil, "serve", "--world", "1", "--rank", "0", "--socket", sock)
	cmd := exec.CommandContext(ctx, py, "-c", code)
	cmd.Env = append(os.Environ(), "TRAINWIRE_SERVE_SOCKET="+sock)
	for {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no socket: %s", p.Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Equal(t, "True  (1.0, 2.0, 3.0, 4.0)\n", string(out))
	require.NoError(t, p.Cmd.Wait(), p.Stderr.String())
}
