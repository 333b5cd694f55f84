package mesh

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// HeaderSize is the size of the header in front of every data message:
//
//	u32 tag | u32 sequence number | u64 payload length   (little-endian)
//
// The receiver checks all three against what it expects, so ranks that
// call different collectives, or the same one with different lengths, get
// an error (ErrDesync) instead of garbage. Headers are not counted in the
// byte counters (see Traffic).
const HeaderSize = 16

type peer struct {
	rank      int
	conn      net.Conn
	transport string

	sendMu  sync.Mutex
	sendSeq uint32
	shdr    [HeaderSize]byte
	sbufs   [2][]byte
	nb      net.Buffers

	recvMu  sync.Mutex
	recvSeq uint32
	rhdr    [HeaderSize]byte
}

// peerFor checks that peer is another rank of this mesh.
func (m *Mesh) peerFor(peer int, op string) (*peer, error) {
	if peer < 0 || peer >= m.world || peer == m.rank {
		return nil, fmt.Errorf("mesh: %s: rank %d is not a peer of rank %d in a world of %d", op, peer, m.rank, m.world)
	}
	return m.peers[peer], nil
}

func (m *Mesh) opName(dir string, pc *phaseCounters) string {
	if pc.name == "" {
		return dir
	}
	return dir + " " + pc.name
}

// Send sends b to peer as one message with the given tag. It writes
// straight from b (one writev of the header and b, no copy in user space)
// and returns when b has been handed to the kernel, so b may be reused at
// once. The whole call must finish within the mesh's Timeout.
//
// On failure the error names the rank that failed (see the package
// documentation): a *PeerError, or an error wrapping ErrClosed after
// Close.
func (m *Mesh) Send(peer int, tag uint32, b []byte) error {
	return m.send(m.counters.cur.Load(), peer, tag, b)
}

func (m *Mesh) send(pc *phaseCounters, peer int, tag uint32, b []byte) error {
	p, err := m.peerFor(peer, m.opName("send", pc))
	if err != nil {
		return err
	}
	if v := m.verdict(); v != nil {
		return v.errorFor(m.opName("send", pc), peer)
	}
	if e := m.droppedErr(peer, m.opName("send", pc)); e != nil {
		return e
	}
	p.sendMu.Lock()
	defer p.sendMu.Unlock()
	binary.LittleEndian.PutUint32(p.shdr[0:], tag)
	binary.LittleEndian.PutUint32(p.shdr[4:], p.sendSeq)
	binary.LittleEndian.PutUint64(p.shdr[8:], uint64(len(b)))
	p.sendSeq++
	_ = p.conn.SetWriteDeadline(time.Now().Add(m.cfg.Timeout))
	p.sbufs[0], p.sbufs[1] = p.shdr[:], b
	p.nb = p.sbufs[:]
	_, err = p.nb.WriteTo(p.conn)
	p.sbufs[1] = nil
	if err != nil {
		return m.fail(peer, m.opName("send", pc), err)
	}
	c := &pc.peers[peer]
	c.bytesSent.Add(int64(len(b)))
	c.msgsSent.Add(1)
	return nil
}

// Recv receives the next message from peer into b, which must be exactly
// as long as the message, with the given tag; a message with another
// tag, length or sequence number is an error wrapping ErrDesync. It reads
// straight into b. The whole call must finish within the mesh's Timeout.
//
// On failure the error names the rank that failed, as for Send.
func (m *Mesh) Recv(peer int, tag uint32, b []byte) error {
	return m.recv(m.counters.cur.Load(), peer, tag, b)
}

func (m *Mesh) recv(pc *phaseCounters, peer int, tag uint32, b []byte) error {
	p, err := m.peerFor(peer, m.opName("recv", pc))
	if err != nil {
		return err
	}
	if v := m.verdict(); v != nil {
		return v.errorFor(m.opName("recv", pc), peer)
	}
	if e := m.droppedErr(peer, m.opName("recv", pc)); e != nil {
		return e
	}
	p.recvMu.Lock()
	defer p.recvMu.Unlock()
	_ = p.conn.SetReadDeadline(time.Now().Add(m.cfg.Timeout))
	if _, err := io.ReadFull(p.conn, p.rhdr[:]); err != nil {
		return m.fail(peer, m.opName("recv", pc), err)
	}
	gotTag := binary.LittleEndian.Uint32(p.rhdr[0:])
	gotSeq := binary.LittleEndian.Uint32(p.rhdr[4:])
	gotLen := binary.LittleEndian.Uint64(p.rhdr[8:])
	if gotTag != tag || gotSeq != p.recvSeq || gotLen != uint64(len(b)) {
		err := fmt.Errorf("%w: expected message #%d with tag %#x and %d bytes, got #%d with tag %#x and %d bytes (ranks called different collectives, or with different lengths)",
			ErrDesync, p.recvSeq, tag, len(b), gotSeq, gotTag, gotLen)
		return m.fail(peer, m.opName("recv", pc), err)
	}
	p.recvSeq++
	if _, err := io.ReadFull(p.conn, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return m.fail(peer, m.opName("recv", pc), err)
	}
	c := &pc.peers[peer]
	c.bytesRecv.Add(int64(len(b)))
	c.msgsRecv.Add(1)
	return nil
}

// Exchange sends sb to sendPeer and receives rb from recvPeer at the same
// time (full duplex: the send runs on its own goroutine), as one step of a
// ring does. Both use tag. It returns when both are done; if either
// fails, the error names the failed rank.
func (m *Mesh) Exchange(tag uint32, sendPeer int, sb []byte, recvPeer int, rb []byte) error {
	return m.exchange(m.counters.cur.Load(), tag, sendPeer, sb, recvPeer, rb)
}

func (m *Mesh) exchange(pc *phaseCounters, tag uint32, sendPeer int, sb []byte, recvPeer int, rb []byte) error {
	errc := make(chan error, 1)
	go func() { errc <- m.send(pc, sendPeer, tag, sb) }()
	rerr := m.recv(pc, recvPeer, tag, rb)
	serr := <-errc
	if rerr != nil {
		return rerr
	}
	return serr
}

// Phase is a handle on one phase's byte counters. Its Send, Recv and
// Exchange are the mesh's, counted under (and named after) that phase
// whatever the mesh's current phase is: for operations whose phases
// overlap, like a pipelined allreduce whose send side is still in
// reduce-scatter while its receive side is in allgather.
type Phase struct {
	m  *Mesh
	pc *phaseCounters
}

// Phase returns the handle on the phase called name (created if new).
func (m *Mesh) Phase(name string) *Phase {
	return &Phase{m: m, pc: m.counters.get(name)}
}

// Name returns the phase's name.
func (p *Phase) Name() string { return p.pc.name }

// Send is Mesh.Send counted under p.
func (p *Phase) Send(peer int, tag uint32, b []byte) error { return p.m.send(p.pc, peer, tag, b) }

// Recv is Mesh.Recv counted under p.
func (p *Phase) Recv(peer int, tag uint32, b []byte) error { return p.m.recv(p.pc, peer, tag, b) }

// Exchange is Mesh.Exchange counted under p.
func (p *Phase) Exchange(tag uint32, sendPeer int, sb []byte, recvPeer int, rb []byte) error {
	return p.m.exchange(p.pc, tag, sendPeer, sb, recvPeer, rb)
}
