package mesh_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/mesh/meshtest"
)

func payload(from, to, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(from*31 + to*7 + i)
	}
	return b
}

// allPairs sends a distinct message from every rank to every other rank,
// all at once (every rank sends to all and receives from all
// concurrently), and checks what arrived.
func allPairs(t *testing.T, ms []*mesh.Mesh, n int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(ms)*len(ms)*2)
	for r, m := range ms {
		for p := range ms {
			if p == r {
				continue
			}
			wg.Go(func() {
				if err := m.Send(p, 7, payload(r, p, n)); err != nil {
					errs <- err
				}
			})
			wg.Go(func() {
				got := make([]byte, n)
				if err := m.Recv(p, 7, got); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, payload(p, r, n)) {
					errs <- fmt.Errorf("rank %d from %d: wrong bytes", r, p)
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestWorldOne(t *testing.T) {
	m, err := mesh.Open(context.Background(), mesh.Config{Env: launch.Env{World: 1}})
	require.NoError(t, err)
	require.Equal(t, 0, m.Rank())
	require.Equal(t, 1, m.World())
	require.Equal(t, "none", m.Transport())
	require.Error(t, m.Send(0, 1, nil))
	require.NoError(t, m.Close())
}

func TestFullMesh(t *testing.T) {
	for _, world := range []int{2, 3, 5} {
		for _, noUnix := range []bool{false, true} {
			t.Run(fmt.Sprintf("world=%d/nounix=%v", world, noUnix), func(t *testing.T) {
				ms := meshtest.Open(t, world, func(c *mesh.Config) { c.NoUnix = noUnix })
				want := mesh.TransportUnix
				if noUnix {
					want = mesh.TransportTCP
				}
				for r, m := range ms {
					require.Equal(t, r, m.Rank())
					require.Equal(t, world, m.World())
					require.Equal(t, want, m.Transport())
					for p := range world {
						if p != r {
							require.Equal(t, want, m.PeerTransport(p))
						}
					}
					require.Len(t, m.Peers(), world)
				}
				allPairs(t, ms, 100_003)
				allPairs(t, ms, 0)
				for r, m := range ms {
					c := m.Counters()[""]
					for p := range world {
						if p == r {
							require.Zero(t, c[p])
							continue
						}
						require.Equal(t, mesh.Traffic{BytesSent: 100_003, BytesRecv: 100_003, MsgsSent: 2, MsgsRecv: 2}, c[p])
					}
				}
				for r, err := range meshtest.CloseAll(ms) {
					require.NoError(t, err, "rank %d", r)
				}
			})
		}
	}
}

func TestMixedUnixSetting(t *testing.T) {
	// Rank 1 has Unix sockets off: its links are TCP, the others Unix.
	ms := meshtest.Open(t, 3, func(c *mesh.Config) { c.NoUnix = c.Env.Rank == 1 })
	require.Equal(t, "mixed", ms[0].Transport())
	require.Equal(t, "mixed", ms[1].Transport())
	require.Equal(t, mesh.TransportTCP, ms[0].PeerTransport(1))
	require.Equal(t, mesh.TransportUnix, ms[0].PeerTransport(2))
	allPairs(t, ms, 1000)
}

func TestExchangeRing(t *testing.T) {
	const world, n = 4, 1 << 16
	ms := meshtest.Open(t, world, nil)
	var wg sync.WaitGroup
	for r, m := range ms {
		wg.Go(func() {
			next, prev := (r+1)%world, (r+world-1)%world
			got := make([]byte, n)
			assert.NoError(t, m.Exchange(3, next, payload(r, next, n), prev, got))
			assert.Equal(t, payload(prev, r, n), got)
		})
	}
	wg.Wait()
}

func TestPhasesAndReset(t *testing.T) {
	ms := meshtest.Open(t, 2, nil)
	for _, m := range ms {
		m.SetPhase("alpha")
		require.Equal(t, "alpha", m.CurrentPhase())
	}
	done := make(chan error)
	go func() { done <- ms[0].Send(1, 1, make([]byte, 10)) }()
	require.NoError(t, ms[1].Recv(0, 1, make([]byte, 10)))
	require.NoError(t, <-done)
	for _, m := range ms {
		m.SetPhase("beta")
	}
	go func() { done <- ms[1].Send(0, 1, make([]byte, 3)) }()
	require.NoError(t, ms[0].Recv(1, 1, make([]byte, 3)))
	require.NoError(t, <-done)
	c := ms[0].Counters()
	require.Equal(t, int64(10), c["alpha"][1].BytesSent)
	require.Equal(t, int64(3), c["beta"][1].BytesRecv)
	require.Equal(t, mesh.Traffic{BytesSent: 10, BytesRecv: 3, MsgsSent: 1, MsgsRecv: 1}, c.Total())
	// A phase handle counts under its own phase, whatever the current one.
	go func() { done <- ms[0].Phase("gamma").Send(1, 1, make([]byte, 5)) }()
	require.NoError(t, ms[1].Phase("gamma").Recv(0, 1, make([]byte, 5)))
	require.NoError(t, <-done)
	require.Equal(t, int64(5), ms[0].Counters()["gamma"][1].BytesSent)
	require.Equal(t, int64(5), ms[1].Counters()["gamma"][0].BytesRecv)
	require.Equal(t, "beta", ms[0].CurrentPhase())
	ms[0].ResetCounters()
	require.Zero(t, ms[0].Counters().Total())
}

func TestDesync(t *testing.T) {
	ms := meshtest.Open(t, 2, nil)
	go func() { _ = ms[0].Send(1, 1, make([]byte, 8)) }()
	err := ms[1].Recv(0, 2, make([]byte, 8))
	require.ErrorIs(t, err, mesh.ErrDesync)
	var pe *mesh.PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 0, pe.Rank)
	require.Equal(t, 3, pe.ExitCode())
	require.Contains(t, err.Error(), "tag 0x2")
	// The whole job is aborted: rank 0 learns it too.
	require.Eventually(t, func() bool { return ms[0].Err() != nil }, 10*time.Second, 5*time.Millisecond)
}

func TestLengthMismatch(t *testing.T) {
	ms := meshtest.Open(t, 2, nil)
	go func() { _ = ms[0].Send(1, 1, make([]byte, 8)) }()
	err := ms[1].Recv(0, 1, make([]byte, 12))
	require.ErrorIs(t, err, mesh.ErrDesync)
	require.Contains(t, err.Error(), "12 bytes")
}

// TestDeadPeer kills rank 2 of 4 (all connections dropped without a
// goodbye) while ranks 1 and 3 wait on it: every surviving rank's error
// names rank 2.
func TestDeadPeer(t *testing.T) {
	for _, victim := range []int{2, 0} {
		t.Run(fmt.Sprintf("victim=%d", victim), func(t *testing.T) {
			ms := meshtest.Open(t, 4, nil)
			errs := make([]error, 4)
			var wg sync.WaitGroup
			for r, m := range ms {
				if r == victim {
					continue
				}
				wg.Go(func() {
					// Everyone waits for a message from its left
					// neighbour, which never comes.
					errs[r] = m.Recv((r+3)%4, 1, make([]byte, 4))
				})
			}
			time.Sleep(50 * time.Millisecond)
			ms[victim].Kill()
			wg.Wait()
			for r, err := range errs {
				if r == victim {
					continue
				}
				var pe *mesh.PeerError
				require.ErrorAs(t, err, &pe, "rank %d", r)
				require.Equal(t, victim, pe.Rank, "rank %d: %v", r, err)
				require.Contains(t, err.Error(), fmt.Sprintf("rank %d", victim))
				require.Equal(t, exit.Peer, pe.ExitCode())
				t.Logf("rank %d: %v", r, err)
			}
		})
	}
}

func TestTimeoutNamesSilentPeer(t *testing.T) {
	ms := meshtest.Open(t, 3, func(c *mesh.Config) { c.Timeout = 400 * time.Millisecond })
	// Rank 1 waits for rank 2, which is alive (heartbeats flow) but never
	// sends.
	err := ms[1].Recv(2, 1, make([]byte, 4))
	var pe *mesh.PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 2, pe.Rank)
	require.Contains(t, err.Error(), "no progress")
	require.Eventually(t, func() bool { return ms[0].Err() != nil && ms[2].Err() != nil }, 10*time.Second, 5*time.Millisecond)
}

func TestAbort(t *testing.T) {
	ms := meshtest.Open(t, 3, nil)
	done := make(chan error)
	go func() { done <- ms[0].Recv(2, 1, make([]byte, 4)) }()
	select {
	case <-ms[2].Aborted():
		t.Fatal("Aborted closed before any abort")
	default:
	}
	ms[1].Abort(context.Canceled)
	err := <-done
	var pe *mesh.PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 1, pe.Rank)
	require.Contains(t, err.Error(), "context canceled")
	require.Error(t, ms[2].Send(0, 1, nil))
	for r, m := range ms {
		select {
		case <-m.Aborted():
		case <-time.After(10 * time.Second):
			t.Fatalf("rank %d: Aborted not closed after the abort", r)
		}
		require.ErrorAs(t, m.Err(), &pe, "rank %d", r)
	}
}

func TestGracefulCloseOrder(t *testing.T) {
	// Rank 0 finishes first; the others keep talking, then close: nobody
	// reports a failure.
	logs := &clitest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ms := meshtest.Open(t, 3, func(c *mesh.Config) { c.Log = log })
	allPairs(t, ms, 1000)
	require.NoError(t, ms[0].Close())
	time.Sleep(50 * time.Millisecond)
	go func() { _ = ms[1].Send(2, 9, []byte("still here")) }()
	require.NoError(t, ms[2].Recv(1, 9, make([]byte, 10)))
	require.NoError(t, ms[2].Close())
	require.NoError(t, ms[1].Close())
	require.ErrorIs(t, ms[1].Err(), mesh.ErrClosed)
	require.Empty(t, logs.String())
}

func TestNonZeroClosesFirst(t *testing.T) {
	logs := &clitest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ms := meshtest.Open(t, 3, func(c *mesh.Config) { c.Log = log })
	require.NoError(t, ms[2].Close())
	time.Sleep(50 * time.Millisecond)
	allPairs(t, ms[:2], 10)
	require.NoError(t, ms[0].Err())
	require.NoError(t, ms[1].Close())
	require.NoError(t, ms[0].Close())
	require.Empty(t, logs.String())
	require.ErrorIs(t, ms[0].Send(1, 1, nil), mesh.ErrClosed)
}

func TestLateRankZero(t *testing.T) {
	// Ranks 1 and 2 start first and retry until rank 0 listens.
	port := clitest.FreePort(t)
	run := "late-zero"
	cfg := func(r int) mesh.Config {
		return mesh.Config{Env: launch.Env{Rank: r, World: 3, MasterAddr: "127.0.0.1", MasterPort: port, RunID: run}, Timeout: 10 * time.Second, ConnectTimeout: 20 * time.Second}
	}
	res := make(chan error, 3)
	ms := make([]*mesh.Mesh, 3)
	for r := 1; r < 3; r++ {
		go func() {
			var err error
			ms[r], err = mesh.Open(context.Background(), cfg(r))
			res <- err
		}()
	}
	time.Sleep(300 * time.Millisecond)
	go func() {
		var err error
		ms[0], err = mesh.Open(context.Background(), cfg(0))
		res <- err
	}()
	for range 3 {
		require.NoError(t, <-res)
	}
	allPairs(t, ms, 100)
	for _, err := range meshtest.CloseAll(ms) {
		require.NoError(t, err)
	}
}

func TestWrongToken(t *testing.T) {
	logs := &clitest.Buffer{}
	cfgs := meshtest.Config(2, meshtest.Listen(t))
	cfgs[0].Token = []byte("right")
	cfgs[0].ConnectTimeout = 1 * time.Second
	cfgs[0].Log = slog.New(slog.NewTextHandler(logs, nil))
	cfgs[1].Token = []byte("wrong")
	ms, errs := meshtest.OpenAll(context.Background(), cfgs)
	require.Nil(t, ms[0])
	require.Nil(t, ms[1])
	require.ErrorIs(t, errs[1], mesh.ErrAuth)
	require.Contains(t, errs[1].Error(), "token")
	var pe *mesh.PeerError
	require.ErrorAs(t, errs[1], &pe)
	require.Equal(t, 0, pe.Rank)
	// Rank 0 refused it, logged who, and timed out waiting for rank 1.
	require.Contains(t, logs.String(), "refused rendezvous connection")
	require.Contains(t, logs.String(), "remote=127.0.0.1:")
	require.Contains(t, errs[0].Error(), "waiting for ranks [1]")
	t.Logf("rank 1: %v", errs[1])
	t.Logf("rank 0: %v", errs[0])
}

func TestNoTokenVersusToken(t *testing.T) {
	cfgs := meshtest.Config(2, meshtest.Listen(t))
	cfgs[0].ConnectTimeout = time.Second
	cfgs[1].Token = []byte("secret")
	_, errs := meshtest.OpenAll(context.Background(), cfgs)
	require.ErrorIs(t, errs[1], mesh.ErrAuth)
}

func TestStrayConnectionIgnored(t *testing.T) {
	ln := meshtest.Listen(t)
	cfgs := meshtest.Config(2, ln)
	for r := range cfgs {
		cfgs[r].Token = []byte("tok")
	}
	// A stray that connects to the rendezvous port and writes garbage.
	stray, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	_, _ = stray.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	defer stray.Close()
	ms, errs := meshtest.OpenAll(context.Background(), cfgs)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	allPairs(t, ms, 10)
	meshtest.CloseAll(ms)
}

func TestWorldMismatch(t *testing.T) {
	cfgs := meshtest.Config(3, meshtest.Listen(t))
	cfgs[2].Env.World = 4
	for r := range cfgs {
		cfgs[r].ConnectTimeout = 3 * time.Second
	}
	_, errs := meshtest.OpenAll(context.Background(), cfgs)
	// Rank 0 and the offender always get the reason; rank 1 gets it if it
	// had joined by then, else it times out.
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		if r != 1 {
			require.Contains(t, err.Error(), "world size mismatch", "rank %d", r)
		}
		t.Logf("rank %d: %v", r, err)
	}
}

func TestDuplicateRank(t *testing.T) {
	cfgs := meshtest.Config(3, meshtest.Listen(t))
	cfgs[2].Env.Rank = 1
	for r := range cfgs {
		cfgs[r].ConnectTimeout = 3 * time.Second
	}
	_, errs := meshtest.OpenAll(context.Background(), cfgs)
	// Rank 0 and the second rank 1 always get the reason; the first rank
	// 1 gets it too (it had joined: it was first).
	n := 0
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		if strings.Contains(err.Error(), "duplicate rank 1") {
			n++
		}
		t.Logf("rank %d: %v", r, err)
	}
	require.Equal(t, 3, n)
}

func TestNonLoopbackNeedsToken(t *testing.T) {
	cfgs := meshtest.Config(2, meshtest.Listen(t))
	for r := range cfgs {
		cfgs[r].Bind = "0.0.0.0"
	}
	_, errs := meshtest.OpenAll(context.Background(), cfgs)
	for _, err := range errs {
		require.Error(t, err)
		require.Contains(t, err.Error(), "without a job token")
	}
	// With a token it works, advertising the address rank 0 sees.
	cfgs = meshtest.Config(2, meshtest.Listen(t))
	for r := range cfgs {
		cfgs[r].Bind = "0.0.0.0"
		cfgs[r].Token = []byte("t")
		cfgs[r].NoUnix = true
	}
	ms, errs := meshtest.OpenAll(context.Background(), cfgs)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	for _, p := range ms[0].Peers() {
		require.False(t, strings.HasPrefix(p.TCP, "0.0.0.0"), p.TCP)
	}
	allPairs(t, ms, 10)
	meshtest.CloseAll(ms)
}

func TestRendezvousTimeout(t *testing.T) {
	cfg := mesh.Config{Env: launch.Env{Rank: 1, World: 2, MasterAddr: "127.0.0.1", MasterPort: clitest.FreePort(t)}, ConnectTimeout: 300 * time.Millisecond}
	_, err := mesh.Open(context.Background(), cfg)
	var pe *mesh.PeerError
	require.ErrorAs(t, err, &pe)
	require.Equal(t, 0, pe.Rank)
	require.Contains(t, err.Error(), "could not reach rank 0")
}

func TestConfigErrors(t *testing.T) {
	_, err := mesh.Open(context.Background(), mesh.Config{Env: launch.Env{Rank: 2, World: 2}})
	require.ErrorContains(t, err, "out of range")
	_, err = mesh.Open(context.Background(), mesh.Config{Env: launch.Env{Rank: 0, World: 2}})
	require.ErrorContains(t, err, "port")
	_, err = mesh.Open(context.Background(), mesh.Config{Env: launch.Env{World: 0}})
	require.Error(t, err)
}

func TestPeerErrorFormat(t *testing.T) {
	e := &mesh.PeerError{Rank: 2, Op: "recv reduce-scatter", Err: errors.New("connection closed by peer (process died?)"), Peer: 2, ReportedBy: -1}
	require.Equal(t, "mesh: rank 2: recv reduce-scatter: connection closed by peer (process died?)", e.Error())
	e = &mesh.PeerError{Rank: 2, Op: "recv reduce-scatter", Err: errors.New("killed or exited"), Peer: 3, ReportedBy: 0}
	require.Equal(t, "mesh: rank 2 failed: killed or exited (reported by rank 0; this rank was in recv reduce-scatter with rank 3)", e.Error())
}
