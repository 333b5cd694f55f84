package cli

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"trainwire.dev/lib/wire"
)

// openPTY opens a pseudo-terminal pair: the test holds the master, the
// verb gets the slave as its stdout.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	require.NoError(t, unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0))
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	require.NoError(t, err)
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return m, s
}

// A stream for a terminal is refused before a byte of it is written;
// text passes; a pipe is not guarded at all.
func TestBinaryNeverToTerminal(t *testing.T) {
	_, slave := openPTY(t)
	var stream bytes.Buffer
	w := wire.NewWriter(&stream, "test")
	require.NoError(t, w.Close())

	g := guardTerminal(slave)
	_, err := g.Write(stream.Bytes())
	require.ErrorIs(t, err, ErrBinaryToTerminal)
	require.Equal(t, ExitUsage, ExitCodeOf(err))

	g = guardTerminal(slave)
	_, err = g.Write([]byte("ALGO  KIND\n"))
	require.NoError(t, err)
	_, err = g.Write(stream.Bytes()) // only the first write decides
	require.NoError(t, err)

	r, pw, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer pw.Close()
	require.Same(t, pw, guardTerminal(pw).(*os.File))
}
