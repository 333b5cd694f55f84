package shm

import (
	"net"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestRangeBounds(t *testing.T) {
	s, err := Create("t", 100, true)
	require.NoError(t, err)
	defer s.Close()
	for _, c := range []struct {
		off, n int64
		ok     bool
	}{{0, 100, true}, {100, 0, true}, {40, 60, true}, {40, 61, false}, {-1, 1, false}, {0, -1, false},
		{101, 0, false}, {1, 1<<63 - 1, false}, {1<<63 - 1, 1, false}} {
		b, err := s.Range(c.off, c.n)
		if c.ok {
			require.NoError(t, err, "%d+%d", c.off, c.n)
			require.Len(t, b, int(c.n))
		} else {
			var re *RangeError
			require.ErrorAs(t, err, &re, "%d+%d", c.off, c.n)
		}
	}
}

// A descriptor passed over a socket maps the same memory, and the receiver
// seals it: the creator can no longer shrink it.
func TestPassAndSeal(t *testing.T) {
	a, b := socketPair(t)
	s, err := Create("pass", 4096, false)
	require.NoError(t, err)
	defer s.Close()
	copy(s.Bytes(), "hello")
	require.NoError(t, SendFD(a, []byte{'x'}, s.FD()))
	buf := make([]byte, 8)
	n, fds, err := RecvMsg(b, buf)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, fds, 1)
	m, err := Map(fds[0])
	require.NoError(t, err)
	defer m.Close()
	require.Equal(t, int64(4096), m.Size())
	require.Equal(t, "hello", string(m.Bytes()[:5]))
	m.Bytes()[0] = 'j'
	require.Equal(t, byte('j'), s.Bytes()[0])
	require.Error(t, unix.Ftruncate(s.FD(), 10), "shrinking a sealed segment")
	require.NoError(t, unix.Ftruncate(s.FD(), 8192), "growing is allowed")
}

// A file that cannot be sealed is refused, and its descriptor closed.
func TestMapRefusesUnsealable(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "x")
	require.NoError(t, err)
	fd, err := unix.Dup(int(f.Fd()))
	require.NoError(t, err)
	f.Close()
	_, err = Map(fd)
	require.ErrorContains(t, err, "MFD_ALLOW_SEALING")
	require.Error(t, unix.Close(fd), "Map closes the descriptor it refuses")
}

func socketPair(t *testing.T) (*net.UnixConn, *net.UnixConn) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	conn := func(fd int) *net.UnixConn {
		f := os.NewFile(uintptr(fd), "sock")
		c, err := net.FileConn(f)
		require.NoError(t, err)
		f.Close()
		t.Cleanup(func() { c.Close() })
		return c.(*net.UnixConn)
	}
	return conn(fds[0]), conn(fds[1])
}
