package mesh

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ctrlConn is a control connection: rank r's rendezvous connection to rank
// 0, kept open for the life of the mesh.
type ctrlConn struct {
	rank int // the rank at the other end
	conn net.Conn
	wmu  sync.Mutex
	bye  atomic.Bool // the other end closed normally
	done chan struct{}
}

// write sends one frame with a write deadline; frames from concurrent
// writers never interleave.
func (c *ctrlConn) write(t msgType, v any, timeout time.Duration) error {
	var body []byte
	if v != nil {
		var err error
		if body, err = json.Marshal(v); err != nil {
			return err
		}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.conn.SetWriteDeadline(time.Now().Add(timeout))
	return writeFrame(c.conn, t, body)
}

// ctrlLostHook, set only by tests, runs in a control reader (not rank
// 0's) that found its connection to rank 0 failed while this rank was
// not closing: the point at which a concurrent Close once turned a dead
// rank 0 into a job-wide abort on a tolerant mesh.
var ctrlLostHook atomic.Pointer[func(*Mesh)]

// startControl starts the control readers and heartbeats: on rank 0 one
// reader and one heartbeat goroutine per rank, elsewhere one of each for
// the connection to rank 0.
func (m *Mesh) startControl() {
	if m.rank == 0 {
		for r := 1; r < m.world; r++ {
			c := m.ctrls[r]
			c.done = make(chan struct{})
			m.bgWG.Go(func() { m.readControl0(c) })
			m.bgWG.Go(func() { m.heartbeat(c) })
		}
		return
	}
	m.ctrl.done = make(chan struct{})
	m.bgWG.Go(func() { m.readControl(m.ctrl) })
	m.bgWG.Go(func() { m.heartbeat(m.ctrl) })
}

// heartbeat writes an empty frame every hbEvery until the mesh closes,
// aborts or the connection ends.
func (m *Mesh) heartbeat(c *ctrlConn) {
	t := time.NewTicker(m.hbEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if c.bye.Load() {
				return
			}
			if err := c.write(msgHeartbeat, nil, m.cfg.Timeout); err != nil {
				return // the reader reports it
			}
		case <-c.done:
			return
		case <-m.closed:
			return
		case <-m.aborted:
			return
		}
	}
}

// lostReason describes why a control connection ended.
func (m *Mesh) lostReason(err error) string {
	var ne net.Error
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("silent for %v: no heartbeat on its control connection (hung or stopped?)", m.silence)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "killed or exited: its control connection closed without a goodbye"
	}
	return "killed or exited: control connection lost (" + describe(err, m.cfg.Timeout) + ")"
}

// readControl0 is rank 0's reader for rank c.rank's control connection.
func (m *Mesh) readControl0(c *ctrlConn) {
	defer close(c.done)
	defer c.conn.Close()
	regrace := false
	for {
		wait := m.silence
		if regrace {
			wait = 2 * m.hbEvery
		}
		_ = c.conn.SetReadDeadline(time.Now().Add(wait))
		t, body, err := readFrame(c.conn)
		if err != nil {
			if c.bye.Load() || m.closing.Load() || m.isAborted() {
				return
			}
			if m.tolerantNow() && !regrace && isTimeout(err) {
				// Before dropping anyone for silence, read what is
				// already buffered: a process resumed after being
				// stopped finds its deadlines passed but the frames
				// (heartbeats, a drop notice) waiting.
				regrace = true
				continue
			}
			if m.tolerantNow() {
				m.drop(verdict{Rank: c.rank, Reason: m.lostReason(err), Reporter: 0})
				return
			}
			m.decide(verdict{Rank: c.rank, Reason: m.lostReason(err), Reporter: 0})
			return
		}
		regrace = false
		switch t {
		case msgHeartbeat:
		case msgReady:
			select {
			case m.readyCh <- c.rank:
			default:
			}
		case msgReport:
			var v verdict
			if json.Unmarshal(body, &v) != nil || v.Rank < 0 || v.Rank >= m.world {
				v = verdict{Rank: c.rank, Reason: "sent a malformed failure report"}
			}
			v.Reporter = c.rank
			if m.tolerantNow() && v.Rank != c.rank {
				if v.Rank == 0 {
					// Its link to us failed, and we are alive.
					v.Rank = c.rank
				}
				m.drop(v)
				continue
			}
			m.decide(v)
		case msgBye:
			c.bye.Store(true)
			m.log.Debug("mesh: rank closed its mesh", "peer", c.rank)
		default:
			m.log.Warn("mesh: unexpected control message", "peer", c.rank, "type", t.String())
		}
	}
}

// readControl is the reader, on ranks other than 0, of the control
// connection to rank 0.
func (m *Mesh) readControl(c *ctrlConn) {
	defer close(c.done)
	defer c.conn.Close()
	regrace := false
	for {
		wait := m.silence
		if regrace {
			wait = 2 * m.hbEvery
		}
		_ = c.conn.SetReadDeadline(time.Now().Add(wait))
		t, body, err := readFrame(c.conn)
		if err != nil {
			if c.bye.Load() || m.closing.Load() || m.isAborted() {
				return
			}
			if h := ctrlLostHook.Load(); h != nil {
				(*h)(m)
			}
			if m.tolerantNow() && !regrace && isTimeout(err) {
				// Before dropping anyone for silence, read what is
				// already buffered: a process resumed after being
				// stopped finds its deadlines passed but the frames
				// (heartbeats, a drop notice) waiting.
				regrace = true
				continue
			}
			if m.tolerantNow() {
				m.dropLocal(verdict{Rank: 0, Reason: m.lostReason(err), Reporter: m.rank})
				return
			}
			m.applyAbort(verdict{Rank: 0, Reason: m.lostReason(err), Reporter: m.rank})
			return
		}
		regrace = false
		switch t {
		case msgHeartbeat:
		case msgGo:
			m.goOnce.Do(func() { close(m.goCh) })
		case msgAbort:
			var v verdict
			if json.Unmarshal(body, &v) != nil {
				v = verdict{Rank: 0, Reason: "aborted the job (malformed abort message)", Reporter: 0}
			}
			m.applyAbort(v)
			return
		case msgDead:
			var v verdict
			if json.Unmarshal(body, &v) != nil || v.Rank < 0 || v.Rank >= m.world {
				m.log.Warn("mesh: malformed drop notice from rank 0")
				continue
			}
			if v.Rank == m.rank {
				m.applyAbort(verdict{Rank: m.rank, Reason: "dropped from the job by rank 0: " + v.Reason, Reporter: 0})
				return
			}
			m.dropLocal(v)
		case msgBye:
			c.bye.Store(true)
			m.log.Debug("mesh: rank 0 closed its mesh")
			return
		default:
			m.log.Warn("mesh: unexpected control message from rank 0", "type", t.String())
		}
	}
}

// decide is rank 0's job-wide verdict: the first failure wins; it is sent
// to every rank still connected, then applied here. Concurrent callers
// wait until the broadcast is done.
func (m *Mesh) decide(v verdict) {
	if m.closing.Load() && !m.isAborted() {
		// A closing (or crashed) rank 0 judges nothing: the others have
		// its goodbye, or will see its control connection drop, and
		// decide on their own.
		return
	}
	m.abortOnce.Do(func() {
		m.log.Error("mesh: aborting the job", "failed_rank", v.Rank, "reason", v.Reason, "reported_by", v.Reporter)
		var wg sync.WaitGroup
		for r := 1; r < m.world; r++ {
			c := m.ctrls[r]
			if c == nil || c.bye.Load() {
				continue
			}
			wg.Go(func() { _ = c.write(msgAbort, &v, min(m.cfg.Timeout, 5*time.Second)) })
		}
		wg.Wait()
		m.abortLocked(v)
	})
}

// applyAbort applies a verdict on this rank only (rank 0's broadcast
// reached us, rank 0 is gone, or no verdict came in time).
func (m *Mesh) applyAbort(v verdict) {
	m.abortOnce.Do(func() { m.abortLocked(v) })
}

// abortLocked records the verdict and closes every data connection, which
// unblocks every send and receive in progress. Called inside abortOnce.
func (m *Mesh) abortLocked(v verdict) {
	m.abortMu.Lock()
	m.verdictV = &v
	close(m.aborted)
	for _, p := range m.peers {
		if p != nil {
			_ = p.conn.Close()
		}
	}
	m.abortMu.Unlock()
	if v.Reporter < 0 {
		m.log.Error("mesh: aborted", "failed_rank", v.Rank, "reason", v.Reason)
	} else if m.rank != 0 {
		m.log.Error("mesh: job aborted", "failed_rank", v.Rank, "reason", v.Reason, "reported_by", v.Reporter)
	}
}

func (m *Mesh) isAborted() bool {
	select {
	case <-m.aborted:
		return true
	default:
		return false
	}
}

func (m *Mesh) verdict() *verdict {
	m.abortMu.Lock()
	defer m.abortMu.Unlock()
	return m.verdictV
}

// Aborted returns a channel closed when the job is aborted (a verdict
// from rank 0, this rank's own, or Abort): then Err names the failed rank.
// A role that waits on something other than the mesh's operations selects
// on it so that a job that dropped this rank never leaves it waiting.
func (m *Mesh) Aborted() <-chan struct{} { return m.aborted }

// Err returns nil while the mesh is usable, the job-wide failure once it
// has been aborted (a *PeerError naming the failed rank), or ErrClosed
// after Close.
func (m *Mesh) Err() error {
	if v := m.verdict(); v != nil {
		return v.errorFor("", -1)
	}
	if m.closing.Load() {
		return ErrClosed
	}
	return nil
}

// fail handles a data-plane failure while talking to peer: it reports it
// to rank 0 (which decides and broadcasts the job-wide verdict), waits
// briefly for that verdict, and returns the error the operation should
// return: the verdict's, which names the rank that actually failed, or
// the local observation if no verdict came.
func (m *Mesh) fail(peer int, op string, err error) error {
	if m.closing.Load() && !m.isAborted() {
		return fmt.Errorf("%w (during %s with rank %d)", ErrClosed, op, peer)
	}
	if v := m.verdict(); v != nil {
		return v.errorFor(op, peer)
	}
	reason := describe(err, m.cfg.Timeout)
	if errors.Is(err, ErrDesync) || errors.Is(err, ErrAuth) {
		reason = err.Error()
	}
	if m.tolerantNow() && peer >= 0 && peer != m.rank {
		return m.failTolerant(peer, op, reason, err)
	}
	local := verdict{Rank: peer, Reason: reason, Reporter: -1}
	if peer < 0 {
		local.Rank = m.rank
	}
	if m.rank == 0 {
		m.decide(verdict{Rank: local.Rank, Reason: reason, Reporter: 0})
	} else {
		c := m.ctrl
		if c != nil && !c.bye.Load() {
			rep := verdict{Rank: local.Rank, Reason: reason, Reporter: m.rank}
			// Wait for the verdict even when the report cannot be sent:
			// rank 0 may be the rank that died, and then this rank's own
			// control reader is about to say so. Naming the neighbour
			// whose connection dropped first would blame the wrong rank.
			_ = c.write(msgReport, &rep, m.grace)
			t := time.NewTimer(m.grace)
			select {
			case <-m.aborted:
			case <-t.C:
			}
			t.Stop()
		}
		m.applyAbort(local)
	}
	v := m.verdict()
	if v == nil {
		// Close began while this failure was handled (rank 0 judges
		// nothing once it is closing): the failure is the shutdown's.
		return fmt.Errorf("%w (during %s with rank %d)", ErrClosed, op, peer)
	}
	e := v.errorFor(op, peer)
	if v.Rank == local.Rank && v.Reason == reason {
		// Our own observation (possibly confirmed by rank 0): keep the
		// original error in the chain.
		e.Err = &causeError{msg: reason, cause: err}
	}
	return e
}

// Abort fails the job on purpose (for example when this rank's context is
// cancelled): every rank's operations in progress and to come return an
// error naming this rank with cause as the reason.
func (m *Mesh) Abort(cause error) {
	if m.world == 1 || m.isAborted() || m.closing.Load() {
		m.applyAbort(verdict{Rank: m.rank, Reason: "aborted: " + cause.Error(), Reporter: -1})
		return
	}
	v := verdict{Rank: m.rank, Reason: "aborted: " + cause.Error(), Reporter: m.rank}
	if m.rank == 0 {
		m.decide(v)
		return
	}
	// Report, and keep our connections open until rank 0's verdict comes
	// back, so that nobody reports our closed connections first.
	if c := m.ctrl; c != nil && !c.bye.Load() && c.write(msgReport, &v, m.grace) == nil {
		t := time.NewTimer(m.grace)
		select {
		case <-m.aborted:
		case <-t.C:
		}
		t.Stop()
	}
	m.applyAbort(v)
}

// Close ends this rank's part in the mesh. It says goodbye on the control
// channel first, so that rank 0 (or, when this is rank 0, every other
// rank) does not take the closed connections for a failure, then closes
// every connection. Operations in progress fail with ErrClosed. Close is
// idempotent and returns nil unless the job was aborted, in which case it
// returns the verdict (like Err).
func (m *Mesh) Close() error {
	m.closeOnce.Do(func() {
		m.closing.Store(true)
		m.closedOnce.Do(func() { close(m.closed) })
		if m.world == 1 {
			return
		}
		if !m.isAborted() {
			m.goodbye()
		}
		m.teardown()
	})
	if v := m.verdict(); v != nil {
		return v.errorFor("", -1)
	}
	return nil
}

// goodbye sends BYE on the control channel(s), half-closes them, and
// waits (briefly) for the other side to close, so that nothing is left
// unread and no reset can destroy the goodbye in flight.
func (m *Mesh) goodbye() {
	wait := min(m.cfg.Timeout, 2*time.Second)
	bye := func(c *ctrlConn) {
		if c == nil || c.done == nil {
			return
		}
		if err := c.write(msgBye, nil, wait); err == nil {
			if cw, ok := c.conn.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-c.done:
		case <-t.C:
		}
		t.Stop()
	}
	if m.rank != 0 {
		bye(m.ctrl)
		return
	}
	var wg sync.WaitGroup
	for r := 1; r < m.world; r++ {
		wg.Go(func() { bye(m.ctrls[r]) })
	}
	wg.Wait()
}

// teardown closes everything Open opened and waits for the background
// goroutines.
func (m *Mesh) teardown() {
	m.closing.Store(true)
	m.endOpen()
	m.closedOnce.Do(func() { close(m.closed) })
	m.abortMu.Lock()
	for _, p := range m.peers {
		if p != nil {
			_ = p.conn.Close()
		}
	}
	m.abortMu.Unlock()
	if m.ctrl != nil {
		_ = m.ctrl.conn.Close()
	}
	for _, c := range m.ctrls {
		if c != nil {
			_ = c.conn.Close()
		}
	}
	m.bgWG.Wait()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()
}
