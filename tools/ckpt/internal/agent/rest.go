package agent

import (
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zeebo/xxh3"
	"golang.org/x/sys/unix"

	"trainwire.dev/tools/ckpt/internal/store"
)

// A shard at rest. A trainer that begins a save maps the agent's buffer
// writable; nothing else outside the agent writes it, and the kernel unmaps
// it when that process exits. So once every such process has exited, this
// rank's newest committed shard changes only if a new save begins. The
// agent hashes it then, in the background: a trainer restarted after a
// crash (seconds later: its interpreter, its imports, its model) finds the
// shard checked, and its restore does not read the shard a second time
// beside its own copy. Whatever a dying trainer wrote into a committed
// shard is in the bytes hashed, so it is still caught ("corrupt").
//
// A check counts for a restore only if it covers the very version (slot,
// iteration, attempt, commit record, sealing time) and no writer has
// registered since it began (registering drops it, and none begins while
// a writer is live). --check-on-restore turns the whole thing off.
type atRest struct {
	mu sync.Mutex
	// watched are the writer processes being watched: pid → the pidfd
	// its watcher holds. live counts writers not known to have exited
	// (one the agent cannot watch stays live until the agent stops).
	watched map[int32]int
	live    int
	check   *restCheck
}

// restCheck is one background hash of a version at rest.
type restCheck struct {
	v           *store.Version
	iter, epoch int64
	record      uint64
	sealed      time.Time
	done        chan struct{} // closed once sum is set
	sum         uint64
}

// wait returns the check's digest once computed.
func (c *restCheck) wait() uint64 {
	<-c.done
	return c.sum
}

// covers says whether c hashed v as it is now (v pinned: its fields do
// not change under the caller).
func (c *restCheck) covers(v *store.Version) bool {
	return c != nil && c.v == v && v.State == store.Complete && c.iter == v.Iter && c.epoch == v.Epoch &&
		c.record == v.XXH3 && c.sealed.Equal(v.When)
}

// registerWriter records that process pid (pidfd: a pidfd of it, or -1
// when it cannot be watched) was handed a writable buffer: every check
// made so far stops counting, and once the process has exited, and no
// other writer is alive, the newest committed shard is hashed at rest.
// A process is watched once, however many connections it opens.
func (a *Agent) registerWriter(pid int32, pidfd int) {
	a.rest.mu.Lock()
	defer a.rest.mu.Unlock()
	a.rest.check = nil
	if pidfd < 0 {
		a.rest.live++
		return
	}
	if fd, ok := a.rest.watched[pid]; ok && !exited(fd) {
		unix.Close(pidfd) // watched already (if that one has exited, pid was reused)
		return
	}
	if a.rest.watched == nil {
		a.rest.watched = map[int32]int{}
	}
	a.rest.watched[pid] = pidfd
	a.rest.live++
	a.wg.Add(1) // the caller, a trainer connection, is counted: Serve has not returned
	go a.watchWriter(pid, pidfd)
}

// watchWriter waits for writer pid to exit, then makes the check if it
// was the last one alive. Serve waits for it before it unmaps the store.
func (a *Agent) watchWriter(pid int32, pidfd int) {
	defer a.wg.Done()
	defer unix.Close(pidfd)
	if !a.awaitExit(pidfd) {
		return
	}
	a.rest.mu.Lock()
	if a.rest.watched[pid] == pidfd {
		delete(a.rest.watched, pid)
	}
	a.rest.live--
	start := a.rest.live == 0
	a.rest.mu.Unlock()
	if start {
		a.checkAtRest()
	}
}

// awaitExit blocks until the process behind pidfd exits (true) or the
// agent stops (false, within 100 ms).
func (a *Agent) awaitExit(pidfd int) bool {
	for a.ctx == nil || a.ctx.Err() == nil {
		fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 100)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return false
		}
		if n > 0 {
			return true
		}
	}
	return false
}

// exited says whether the process behind pidfd has exited.
func exited(pidfd int) bool {
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, 0)
	return err == nil && n > 0
}

// checkAtRest hashes this rank's newest committed shard, if this agent
// holds it and no writer is alive; a restore that comes meanwhile waits
// for the digest.
func (a *Agent) checkAtRest() {
	if a.cfg.CheckOnRestore {
		return
	}
	iter, epoch := a.st.CommittedAt()
	if iter < 0 {
		return
	}
	v := a.st.Get(a.cfg.Rank, iter, epoch)
	if v == nil {
		return
	}
	a.rest.mu.Lock()
	if a.rest.live > 0 {
		a.rest.mu.Unlock()
		a.st.Unpin(v)
		return
	}
	c := &restCheck{v: v, iter: v.Iter, epoch: v.Epoch, record: v.XXH3, sealed: v.When, done: make(chan struct{})}
	a.rest.check = c
	a.rest.mu.Unlock()
	t0 := time.Now()
	c.sum = xxh3.Hash(v.Data())
	a.st.Unpin(v)
	close(c.done)
	if c.sum != c.record {
		a.log.Warn("this rank's shard at rest does not match its commit record: a restore of it will be refused", "iter", c.iter, "xxh3", hex(c.sum), "record", hex(c.record))
		return
	}
	a.log.Debug("checked this rank's shard at rest (every process that could write it has exited)", "iter", c.iter, "bytes", v.Len, "elapsed", time.Since(t0).Round(time.Millisecond))
}

// restChecked returns the at-rest check that covers v (pinned), if one
// does and no writer has registered since it began.
func (a *Agent) restChecked(v *store.Version) *restCheck {
	if v == nil || a.cfg.CheckOnRestore {
		return nil
	}
	a.rest.mu.Lock()
	defer a.rest.mu.Unlock()
	if c := a.rest.check; c.covers(v) {
		return c
	}
	return nil
}

// digestOf returns the XXH3 of data, the bytes of v (nil: not a version
// of the store): the at-rest check's when it covers v, else computed now.
func (a *Agent) digestOf(v *store.Version, data []byte) uint64 {
	if c := a.restChecked(v); c != nil {
		atomic.AddInt64(&a.stats.CheckedAtRest, 1)
		return c.wait()
	}
	return xxh3.Hash(data)
}

// peerProcess returns the pid of c's peer process (a Unix socket's) and
// a pidfd of it, or -1. SO_PEERPIDFD (Linux 6.5) names the very process
// that connected; before it, pidfd_open of SO_PEERCRED's pid, taken while
// the connection is open.
func peerProcess(c net.Conn) (pid int32, pidfd int) {
	pidfd = -1
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return 0, -1
	}
	rc, err := uc.SyscallConn()
	if err != nil {
		return 0, -1
	}
	_ = rc.Control(func(s uintptr) {
		cred, err := unix.GetsockoptUcred(int(s), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil || cred.Pid <= 0 {
			return
		}
		pid = cred.Pid
		if p, err := unix.GetsockoptInt(int(s), unix.SOL_SOCKET, unix.SO_PEERPIDFD); err == nil {
			pidfd = p
		} else if p, err := unix.PidfdOpen(int(pid), 0); err == nil {
			pidfd = p
		}
	})
	return pid, pidfd
}
