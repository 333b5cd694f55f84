package clitest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Ports for processes that bind them later are drawn from below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range), each checked
// free by binding it once. A port from 127.0.0.1:0 is an ephemeral one,
// which any outgoing connection on the machine may take as its source port
// between the check and the process's own bind: a loaded run of
// TestAllToAllEqualsTorch failed so ("bind: address already in use").
// Below the range only an explicit bind can take it — such as another
// test package's process, run at the same time by go test, that checked
// the same port in the same moment: every port handed out is also
// reserved across processes (reserve) until the test ends.

// portLocks is the directory of the reservations' lock files.
var portLocks = filepath.Join(os.TempDir(), "trainwire-test-ports")

// reserve takes port p across every test process on the machine: an
// exclusive flock on a file named after it, held until the returned file
// is closed (or the process ends). It returns nil when another test (in
// this process or another) holds p.
func reserve(t testing.TB, p int) *os.File {
	if err := os.MkdirAll(portLocks, 0o777); err != nil {
		t.Fatalf("clitest: port reservations: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(portLocks, fmt.Sprint(p)), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		t.Fatalf("clitest: port reservations: %v", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil
	}
	return f
}

// ephemeralLow is the first port of the ephemeral range (32768 when the
// kernel does not say).
func ephemeralLow() int {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var hi int
		if n, _ := fmt.Sscan(string(b), &lo, &hi); n != 2 {
			lo = 32768
		}
	}
	return lo
}

// pickPorts returns n distinct ports on 127.0.0.1 from below the
// ephemeral range that were free a moment ago (with consecutive, n in a
// row), holding each checked one until all are chosen.
func pickPorts(t testing.TB, n int, consecutive bool) []int {
	t.Helper()
	const first = 10000
	top := ephemeralLow()
	if top-first < 1000 {
		t.Fatalf("clitest: the ephemeral port range starts at %d: no room below it for test ports", top)
	}
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	taken := map[int]bool{}
	var out []int
	for try := 0; len(out) < n; try++ {
		if try > 1000 {
			t.Fatalf("clitest: no %d free ports on 127.0.0.1 in [%d, %d)", n, first, top)
		}
		ps := []int{first + rand.IntN(top-first-n)}
		if consecutive {
			for k := 1; k < n; k++ {
				ps = append(ps, ps[0]+k)
			}
		}
		var ls []net.Listener
		var locks []*os.File
		ok := true
		for _, p := range ps {
			var lk *os.File
			if !taken[p] {
				lk = reserve(t, p)
			}
			if lk == nil {
				ok = false
				break
			}
			locks = append(locks, lk)
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		if !ok {
			for _, l := range ls {
				l.Close()
			}
			for _, lk := range locks {
				lk.Close()
			}
			continue
		}
		// Held until the test ends: no other test process picks them.
		t.Cleanup(func() {
			for _, lk := range locks {
				lk.Close()
			}
		})
		held = append(held, ls...)
		for _, p := range ps {
			taken[p] = true
		}
		out = append(out, ps...)
	}
	return out
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago,
// from below the ephemeral range.
func FreePort(t testing.TB) int {
	t.Helper()
	return pickPorts(t, 1, false)[0]
}

// FreeLauncherPort returns a port P on 127.0.0.1 such that P and P+1 were
// both free a moment ago: a launcher's MASTER_PORT (torchrun's TCPStore
// takes P, trainwire's rendezvous P+1, see lib/launch).
func FreeLauncherPort(t testing.TB) int {
	t.Helper()
	return pickPorts(t, 2, true)[0]
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1 (every one
// held until all n are chosen, so none is handed out twice).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	return pickPorts(t, n, false)
}
