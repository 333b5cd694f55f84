package agent

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/store"
)

// streamPair is an agent-side conn and a Client joined by a Unix socket.
func streamPair(t *testing.T) (*conn, *Client) {
	t.Helper()
	l, err := net.Listen("unix", filepath.Join(t.TempDir(), "s"))
	require.NoError(t, err)
	defer l.Close()
	cl, err := Dial(l.Addr().String(), 10*time.Second, wire.DefaultLimits)
	require.NoError(t, err)
	c, err := l.Accept()
	require.NoError(t, err)
	t.Cleanup(func() { cl.Close(); c.Close() })
	return newConn(c, wire.DefaultLimits, 10*time.Second, "trainer"), cl
}

// bufferFile is a file standing for one of the agent's buffers.
func bufferFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o600))
	return p
}

// serveRequest runs the agent's side of one trainer request on cn: it
// reads the request and passes its header to serve, on its own goroutine;
// the channel gets serve's error.
func serveRequest(cn *conn, serve func(meta map[string]string) error) <-chan error {
	done := make(chan error, 1)
	go func() {
		meta, _, err := cn.recv(0)
		if err == nil {
			err = serve(meta)
		}
		done <- err
	}()
	return done
}

// serveRelease answers the client's "release".
func serveRelease(cn *conn) error {
	m, _, err := cn.recv(0)
	if err != nil {
		return err
	}
	if m[kOp] != "release" {
		return errors.New("want release, got " + m[kOp])
	}
	return cn.send(map[string]string{kOp: "ok"})
}

// A streamed restore that follows a fetch in flight: the trainer copies
// the first bytes before the rest has arrived, is moved to another buffer
// when the first holder fails, and gets the second buffer's bytes whole.
func TestStreamedRestoreFollowsAFetch(t *testing.T) {
	const size = 12 << 20
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(rand.Uint32())
	}
	first := bufferFile(t, "first", bytes.Repeat([]byte{0xAA}, size))
	second := bufferFile(t, "second", want)
	info := store.Info{Len: size, XXH3: 42, Format: "raw"}

	cn, cl := streamPair(t)
	land := newLanding()
	wait := make(chan struct{})
	got4 := make(chan struct{}) // the trainer copied the first 4 MiB
	agentErr := make(chan error, 1)
	go func() {
		agentErr <- func() error {
			if _, _, err := cn.recv(0); err != nil { // the request
				return err
			}
			s := &streamer{cn: cn, iter: 7, committed: 7}
			go func() {
				land.begin(first, info, 1)
				land.advance(4 << 20)
				<-got4
				land.advance(6 << 20) // then holder 1 fails: holder 2 serves it
				land.begin(second, info, 2)
				for n := int64(4 << 20); n <= size; n += 4 << 20 {
					land.advance(n)
				}
				close(wait)
			}()
			if err := s.follow(context.Background(), land, wait); err != nil {
				return err
			}
			if err := s.done(); err != nil {
				return err
			}
			return serveRelease(cn)
		}()
	}()

	out := make([]byte, size)
	calls := 0
	res, err := cl.RestoreShm(-1, func(mem []byte, ready func(int64) error) error {
		calls++
		for off := 0; off < len(mem); off += 1 << 20 {
			if err := ready(int64(off + 1<<20)); err != nil {
				return err
			}
			copy(out[off:], mem[off:off+1<<20])
			if calls == 1 && off+1<<20 == 4<<20 {
				close(got4)
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NoError(t, <-agentErr)
	require.Equal(t, 2, calls, "the move to the second holder's buffer restarts the copy")
	require.Equal(t, "peer:2", res[kSource])
	require.Equal(t, "7", res[kIter])
	require.True(t, bytes.Equal(out, want), "the copy is the second buffer's bytes")
}

// A local version whose digest does not match: the trainer is told of the
// buffer first (the check runs while it copies), and the restore fails
// with "corrupt" rather than returning what it copied as the checkpoint.
func TestStreamedRestoreCorruptLocal(t *testing.T) {
	a := newTestAgent(t, 0, 2)
	data := bytes.Repeat([]byte("trainwire"), 1000)
	b, err := store.NewBuffer("stream-test", int64(len(data)))
	require.NoError(t, err)
	copy(b.Bytes(), data)
	cn, cl := streamPair(t)
	agentErr := serveRequest(cn, func(meta map[string]string) error {
		s := &streamer{cn: cn}
		_, _, err := a.handOver(cn, meta, 3, 3, "local", nil, b, b.Bytes()[:len(data)], 12345, FormatRaw, false, s)
		return err
	})
	var saw []byte
	_, err = cl.RestoreShm(3, func(mem []byte, ready func(int64) error) error {
		require.NoError(t, ready(int64(len(mem))))
		saw = append(saw, mem...)
		return nil
	})
	require.NoError(t, <-agentErr)
	var re *RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "corrupt", re.Code)
	require.Contains(t, re.Msg, "not the checkpoint")
	if saw != nil { // the trainer mapped the buffer before the agent gave up on it
		require.Equal(t, data, saw)
	}
}

// Progress messages are bounded and ordered: a shrinking or oversized
// "ready" from the agent is an error, not a copy past what arrived.
func TestStreamedRestoreBadProgress(t *testing.T) {
	p := bufferFile(t, "buf", make([]byte, 1<<20))
	for _, ready := range []string{"2097152", "-1", "x"} {
		cn, cl := streamPair(t)
		go func() {
			if _, _, err := cn.recv(0); err != nil {
				return
			}
			_ = cn.send(map[string]string{kOp: "ok", kIter: "1", kLen: itoa(1 << 20), kPath: p, kStream: "1", kReady: "0", kSource: "peer:1"})
			_ = cn.send(map[string]string{kOp: "progress", kReady: ready})
		}()
		_, err := cl.RestoreShm(1, func(mem []byte, r func(int64) error) error { return r(int64(len(mem))) })
		require.ErrorContains(t, err, "restore progress", "ready %s", ready)
	}
}
