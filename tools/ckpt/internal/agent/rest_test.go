package agent

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"trainwire.dev/tools/ckpt/internal/store"
)

// childWriter starts a real process standing for a trainer that got a
// writable buffer, and registers it with a (twice: as a trainer that
// opened two connections); kill ends the process.
func childWriter(t *testing.T, a *Agent) (kill func()) {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	for range 2 {
		fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		require.NoError(t, err)
		a.registerWriter(int32(cmd.Process.Pid), fd)
	}
	done := false
	kill = func() {
		if !done {
			done = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(func() {
		kill()
		a.wg.Wait() // the watcher's check reads the store's memory: done before the store closes
	})
	return kill
}

// checkedAtRest waits up to d until a's at-rest check covers its rank's
// version of iter and returns that check (nil: none came).
func checkedAtRest(t *testing.T, a *Agent, iter int64, d time.Duration) *restCheck {
	t.Helper()
	v := a.st.Get(a.cfg.Rank, iter, store.AnyEpoch)
	require.NotNil(t, v)
	defer a.st.Unpin(v)
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if c := a.restChecked(v); c != nil {
			c.wait()
			return c
		}
	}
	return nil
}

// TestAtRest: the shard is hashed once every process that could write it
// has exited, and a restore then takes that digest instead of reading the
// shard again; what the writer wrote before it died is still caught; a new
// writer, or --check-on-restore, makes the restore hash again.
func TestAtRest(t *testing.T) {
	const soon, none = 20 * time.Second, 300 * time.Millisecond
	data := bytes.Repeat([]byte("at rest."), 8192)
	setup := func(t *testing.T) *Agent {
		a := newTestAgent(t, 0, 2)
		sealed(t, a, 0, 1, data)
		a.st.SetCommitted(1, 0)
		return a
	}

	t.Run("checked after the writer exits", func(t *testing.T) {
		a := setup(t)
		kill := childWriter(t, a)
		a.rest.mu.Lock()
		require.Equal(t, 1, a.rest.live, "one process, watched once")
		a.rest.mu.Unlock()
		require.Nil(t, checkedAtRest(t, a, 1, none), "checked while the writer's process is alive")
		kill()
		c := checkedAtRest(t, a, 1, soon)
		require.NotNil(t, c, "not checked after the writer exited")
		require.Equal(t, c.record, c.sum)
		seen, res, err := speculativeRestore(t, a, 1)
		require.NoError(t, err)
		require.Equal(t, "1", res["iter"])
		require.Equal(t, data, seen[len(seen)-1])
		require.Equal(t, int64(1), atomic.LoadInt64(&a.stats.CheckedAtRest))
	})

	t.Run("a dying writer's scribble is caught", func(t *testing.T) {
		a := setup(t)
		kill := childWriter(t, a)
		v := a.st.Get(0, 1, store.AnyEpoch)
		v.Data()[4096] ^= 1 // written through its mapping after the commit
		a.st.Unpin(v)
		kill()
		c := checkedAtRest(t, a, 1, soon)
		require.NotNil(t, c)
		require.NotEqual(t, c.record, c.sum)
		_, _, err := speculativeRestore(t, a, 1)
		requireCorrupt(t, err)
	})

	t.Run("a new writer voids the check", func(t *testing.T) {
		a := setup(t)
		kill := childWriter(t, a)
		kill()
		require.NotNil(t, checkedAtRest(t, a, 1, soon))
		defer childWriter(t, a)()
		require.Nil(t, checkedAtRest(t, a, 1, none), "a check made before a writer registered still counts")
		v := a.st.Get(0, 1, store.AnyEpoch)
		v.Data()[0] ^= 1
		a.st.Unpin(v)
		_, _, err := speculativeRestore(t, a, 1)
		requireCorrupt(t, err) // the restore hashed the shard again
		require.Zero(t, atomic.LoadInt64(&a.stats.CheckedAtRest))
	})

	t.Run("a resealed slot is not covered", func(t *testing.T) {
		a := setup(t)
		kill := childWriter(t, a)
		kill()
		c := checkedAtRest(t, a, 1, soon)
		require.NotNil(t, c)
		v := a.st.Get(0, 1, store.AnyEpoch)
		defer a.st.Unpin(v)
		v.When = v.When.Add(time.Nanosecond) // sealed again since the check
		require.False(t, c.covers(v))
	})

	t.Run("--check-on-restore", func(t *testing.T) {
		a := setup(t)
		a.cfg.CheckOnRestore = true
		kill := childWriter(t, a)
		kill()
		require.Nil(t, checkedAtRest(t, a, 1, none))
		_, _, err := speculativeRestore(t, a, 1)
		require.NoError(t, err)
		require.Zero(t, atomic.LoadInt64(&a.stats.CheckedAtRest))
	})

	t.Run("a reused pid is another writer", func(t *testing.T) {
		a := setup(t)
		dead := exec.Command("true") // a writer that has exited, its watcher not yet woken
		require.NoError(t, dead.Start())
		fd, err := unix.PidfdOpen(dead.Process.Pid, 0)
		require.NoError(t, err)
		defer unix.Close(fd)
		require.NoError(t, dead.Wait())
		pid := int32(dead.Process.Pid)
		a.rest.mu.Lock()
		a.rest.watched = map[int32]int{pid: fd}
		a.rest.live = 1
		a.rest.mu.Unlock()
		next := exec.Command("sleep", "60") // a new writer under the same pid
		require.NoError(t, next.Start())
		t.Cleanup(func() { _ = next.Process.Kill(); _ = next.Wait(); a.wg.Wait() })
		nfd, err := unix.PidfdOpen(next.Process.Pid, 0)
		require.NoError(t, err)
		a.registerWriter(pid, nfd)
		a.rest.mu.Lock()
		require.Equal(t, nfd, a.rest.watched[pid], "the new process under a reused pid is not watched")
		require.Equal(t, 2, a.rest.live)
		a.rest.live-- // what the dead one's watcher does when it wakes
		a.rest.mu.Unlock()
		require.Nil(t, checkedAtRest(t, a, 1, none), "checked while the process under the reused pid is alive")
		_ = next.Process.Kill()
		require.NotNil(t, checkedAtRest(t, a, 1, soon))
	})

	t.Run("an unwatchable writer stays live", func(t *testing.T) {
		a := setup(t)
		a.registerWriter(0, -1)
		require.Nil(t, checkedAtRest(t, a, 1, none))
	})
}

func requireCorrupt(t *testing.T, err error) {
	t.Helper()
	var re *RemoteError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "corrupt", re.Code)
}

// TestPeerProcess: the agent gets the pid and a pidfd of the process at the other end
// of a trainer's Unix socket (here this very process).
func TestPeerProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", path)
	require.NoError(t, err)
	defer l.Close()
	go func() {
		c, err := net.Dial("unix", path)
		if err == nil {
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	c, err := l.Accept()
	require.NoError(t, err)
	defer c.Close()
	pid, fd := peerProcess(c)
	require.Equal(t, int32(os.Getpid()), pid)
	require.GreaterOrEqual(t, fd, 0)
	defer unix.Close(fd)
	require.NoError(t, unix.PidfdSendSignal(fd, 0, nil, 0), "the pidfd does not name a live process")
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", fd))
	require.NoError(t, err)
	require.Contains(t, string(info), fmt.Sprintf("Pid:\t%d\n", os.Getpid()), "the pidfd names another process")
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer tcp.Close()
	go func() {
		if c, err := net.Dial("tcp", tcp.Addr().String()); err == nil {
			time.Sleep(time.Second)
			c.Close()
		}
	}()
	tc, err := tcp.Accept()
	require.NoError(t, err)
	defer tc.Close()
	_, fd = peerProcess(tc)
	require.Equal(t, -1, fd, "a TCP peer has no pidfd")
}
