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

// A port reserved by one test (in this process or another: flock works on
// open files, not processes) is not reserved again until it is released.
func TestPortReservation(t *testing.T) {
	p := FreePort(t) // reserved by this test until it ends
	require.Nil(t, reserve(t, p), "a port handed out is reserved")
	q := 10000 + (p-10000+1)%(ephemeralLow()-10000)
	lk := reserve(t, q)
	if lk == nil {
		t.Skipf("port %d is reserved by another test right now", q)
	}
	require.Nil(t, reserve(t, q), "reserved twice")
	lk.Close()
	lk = reserve(t, q)
	require.NotNil(t, lk, "free again once released")
	lk.Close()
}
