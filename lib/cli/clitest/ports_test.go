package clitest

import (
	"fmt"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPortsBelowEphemeral: the ports handed out are below the kernel's
// ephemeral range (where no outgoing connection takes one by itself),
// distinct, bindable, and a launcher's pair is consecutive.
func TestPortsBelowEphemeral(t *testing.T) {
	lo := ephemeralLow()
	ps := FreePorts(t, 20)
	seen := map[int]bool{}
	for _, p := range append(ps, FreePort(t)) {
		require.Less(t, p, lo)
		require.GreaterOrEqual(t, p, 10000)
		require.False(t, seen[p], "port %d twice", p)
		seen[p] = true
	}
	p := FreeLauncherPort(t)
	for _, q := range []int{p, p + 1} {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
		require.NoError(t, err)
		l.Close()
	}
}
