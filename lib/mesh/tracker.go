package mesh

import (
	"net"
	"sync"
)

// tracker follows the goroutines of an accept loop and the connections
// they are still authenticating, so the loop can be stopped and waited
// for: Open and Close return only when nothing of theirs still runs.
type tracker struct {
	mu    sync.Mutex
	conns map[net.Conn]bool // value: authenticated
	done  bool
	wg    sync.WaitGroup
}

// goLoop runs f on a tracked goroutine.
func (t *tracker) goLoop(f func()) { t.wg.Go(f) }

// goConn runs f(conn) on a tracked goroutine, conn being closed by stop
// unless f releases it first. After stop it closes conn at once.
func (t *tracker) goConn(conn net.Conn, f func(net.Conn)) {
	t.mu.Lock()
	if t.done {
		t.mu.Unlock()
		_ = conn.Close()
		return
	}
	if t.conns == nil {
		t.conns = map[net.Conn]bool{}
	}
	t.conns[conn] = false
	t.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer t.wg.Done()
		f(conn)
		t.release(conn)
	}()
}

// authenticated marks conn as having passed the handshake, so that stop
// says farewell on it.
func (t *tracker) authenticated(conn net.Conn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.conns[conn]; ok {
		t.conns[conn] = true
	}
}

// release stops tracking conn (it has been handed over); it reports
// whether conn was still tracked (false: stop already closed it).
func (t *tracker) release(conn net.Conn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.conns[conn]
	delete(t.conns, conn)
	return ok
}

// stop closes every tracked connection, calling farewell (if not nil)
// first on the authenticated ones, and waits for every tracked goroutine.
// The caller must first make the loops return (close their listener).
func (t *tracker) stop(farewell func(net.Conn)) {
	t.mu.Lock()
	t.done = true
	for c, auth := range t.conns {
		if auth && farewell != nil {
			farewell(c)
		}
		_ = c.Close()
	}
	t.conns = nil
	t.mu.Unlock()
	t.wg.Wait()
}
