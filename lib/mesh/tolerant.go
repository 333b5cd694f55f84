package mesh

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// A tolerant mesh (Config.Tolerant) drops failed ranks instead of aborting
// the job. This file holds the dropping and the calls that only make sense
// with it.

// dropLocal records that rank v.Rank is gone, on this rank only: its data
// connection is closed (unblocking any send or receive in progress with
// it) and OnDead is called. It returns false if the rank was already
// dropped.
func (m *Mesh) dropLocal(v verdict) bool {
	m.abortMu.Lock()
	if m.dropped == nil {
		m.dropped = map[int]*verdict{}
	}
	if _, ok := m.dropped[v.Rank]; ok || v.Rank == m.rank || v.Rank < 0 || v.Rank >= m.world {
		m.abortMu.Unlock()
		return false
	}
	m.dropped[v.Rank] = &v
	if p := m.peers[v.Rank]; p != nil {
		_ = p.conn.Close()
	}
	m.abortMu.Unlock()
	switch {
	case m.closing.Load():
	case m.rank == 0 || v.Reporter == 0:
		m.log.Warn("mesh: rank dropped", "dropped_rank", v.Rank, "reason", v.Reason, "reported_by", v.Reporter)
	default:
		m.log.Info("mesh: rank dropped", "dropped_rank", v.Rank, "reason", v.Reason, "reported_by", v.Reporter)
	}
	if cb := m.cfg.OnDead; cb != nil {
		go cb(v.Rank, errors.New(v.Reason))
	}
	return true
}

// drop is the tolerant verdict: rank 0 drops the rank and tells every
// other rank (the dropped one included, so that a rank that was only hung
// learns it is out); another rank drops it locally and reports to rank 0.
func (m *Mesh) drop(v verdict) {
	if m.rank == 0 && v.Rank > 0 && v.Rank < m.world && m.ctrls[v.Rank] != nil && m.ctrls[v.Rank].bye.Load() {
		// It closed its mesh normally: its links end, it did not fail.
		m.dropLocal(verdict{Rank: v.Rank, Reason: "closed its mesh", Reporter: v.Reporter})
		return
	}
	if !m.dropLocal(v) {
		return
	}
	if m.rank == 0 && m.closing.Load() {
		// A closing (or crashed) rank 0 judges nothing, as in decide:
		// the others have its goodbye, or will see it go.
		return
	}
	if m.rank == 0 {
		var done []chan struct{}
		for r := 1; r < m.world; r++ {
			c := m.ctrls[r]
			if c == nil || c.bye.Load() {
				continue
			}
			ch := make(chan struct{})
			done = append(done, ch)
			go func() {
				defer close(ch)
				_ = c.write(msgDead, &v, min(m.cfg.Timeout, 2*time.Second))
				if r == v.Rank {
					_ = c.conn.Close()
				}
			}()
		}
		for _, ch := range done {
			<-ch
		}
		return
	}
	if c := m.ctrl; c != nil && !c.bye.Load() && !m.IsDropped(0) {
		rep := v
		rep.Reporter = m.rank
		go func() { _ = c.write(msgReport, &rep, m.grace) }()
	}
}

// failTolerant is fail for a tolerant mesh: the link to peer is unusable
// (its message stream is cut somewhere), so the peer is dropped here and
// reported, and the operation fails at once naming it.
func (m *Mesh) failTolerant(peer int, op, reason string, err error) error {
	if v := m.droppedVerdict(peer); v != nil {
		return &PeerError{Rank: peer, Op: op, Err: errors.New(v.Reason), Peer: peer, ReportedBy: v.Reporter}
	}
	m.drop(verdict{Rank: peer, Reason: reason, Reporter: m.rank})
	return &PeerError{Rank: peer, Op: op, Err: &causeError{msg: reason, cause: err}, Peer: peer, ReportedBy: -1}
}

func (m *Mesh) droppedVerdict(peer int) *verdict {
	m.abortMu.Lock()
	defer m.abortMu.Unlock()
	return m.dropped[peer]
}

// droppedErr is the error of an operation with a dropped peer, nil if the
// peer is alive.
func (m *Mesh) droppedErr(peer int, op string) error {
	v := m.droppedVerdict(peer)
	if v == nil {
		return nil
	}
	rep := v.Reporter
	if rep == m.rank {
		rep = -1
	}
	return &PeerError{Rank: peer, Op: op, Err: fmt.Errorf("dropped: %s", v.Reason), Peer: peer, ReportedBy: rep}
}

// IsDropped says whether a tolerant mesh has dropped rank r.
func (m *Mesh) IsDropped(r int) bool { return m.droppedVerdict(r) != nil }

// Alive returns the ranks not dropped (this one included), ascending. On a
// mesh that is not tolerant it is every rank until the job aborts, then
// none.
func (m *Mesh) Alive() []int {
	if m.isAborted() {
		return nil
	}
	m.abortMu.Lock()
	defer m.abortMu.Unlock()
	out := make([]int, 0, m.world)
	for r := range m.world {
		if _, gone := m.dropped[r]; !gone {
			out = append(out, r)
		}
	}
	return out
}

// Tolerant says whether the mesh drops failed ranks instead of aborting.
func (m *Mesh) Tolerant() bool { return m.cfg.Tolerant }

// RecvAny receives the next message from peer whatever its tag and length
// (at most max bytes; a longer one is an error wrapping ErrDesync), into a
// new slice. Unlike Recv it waits without a deadline: it is for a reader
// goroutine that serves one peer for the life of the mesh, where silence
// is normal; a dead peer ends it (connection closed, or dropped or
// aborted by the control plane's heartbeats). Sequence numbers are
// checked as for Recv, so RecvAny and Recv must not be mixed on one peer
// concurrently.
func (m *Mesh) RecvAny(peer, max int) (tag uint32, b []byte, err error) {
	pc := m.counters.cur.Load()
	p, err := m.peerFor(peer, m.opName("recv", pc))
	if err != nil {
		return 0, nil, err
	}
	op := m.opName("recv", pc)
	if v := m.verdict(); v != nil {
		return 0, nil, v.errorFor(op, peer)
	}
	if e := m.droppedErr(peer, op); e != nil {
		return 0, nil, e
	}
	p.recvMu.Lock()
	defer p.recvMu.Unlock()
	_ = p.conn.SetReadDeadline(time.Time{})
	if _, err := io.ReadFull(p.conn, p.rhdr[:]); err != nil {
		return 0, nil, m.fail(peer, op, err)
	}
	tag = binary.LittleEndian.Uint32(p.rhdr[0:])
	gotSeq := binary.LittleEndian.Uint32(p.rhdr[4:])
	gotLen := binary.LittleEndian.Uint64(p.rhdr[8:])
	if gotSeq != p.recvSeq || gotLen > uint64(max) {
		err := fmt.Errorf("%w: expected message #%d of at most %d bytes, got #%d with tag %#x and %d bytes", ErrDesync, p.recvSeq, max, gotSeq, tag, gotLen)
		return 0, nil, m.fail(peer, op, err)
	}
	p.recvSeq++
	b = make([]byte, gotLen)
	_ = p.conn.SetReadDeadline(time.Now().Add(m.cfg.Timeout))
	if _, err := io.ReadFull(p.conn, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, m.fail(peer, op, err)
	}
	c := &pc.peers[peer]
	c.bytesRecv.Add(int64(len(b)))
	c.msgsRecv.Add(1)
	return tag, b, nil
}

// tolerantNow says whether failures drop ranks: a tolerant mesh once Open
// has succeeded (during Open a failure still fails Open everywhere).
//
// It does not depend on Close. Every caller first ignores failures seen
// once this rank is closing (closing is set before Close closes anything,
// so a failure seen before that is a real one); if the mode then changed
// with closing, a Close that began between that check and this one would
// turn a dead rank into a job-wide abort on a tolerant mesh, and Close
// would return it (TestTolerantCloseWhileRank0Dies).
func (m *Mesh) tolerantNow() bool {
	if !m.cfg.Tolerant {
		return false
	}
	select {
	case <-m.openDone:
		return true
	default:
		return false
	}
}
