package mesh

import (
	"sync"
	"sync/atomic"
)

// Traffic is what went over the data connection to one peer.
//
// Byte counts are payload bytes only: the bytes of the slices passed to
// Send and Recv. Every message also carries a HeaderSize-byte header, so
// the bytes on the wire are Bytes + HeaderSize·Msgs in each direction. This
// keeps the counters equal to the volume formulas of the collectives (ring
// allreduce sends exactly 2(n−1)/n·M payload bytes per rank).
type Traffic struct {
	// BytesSent and BytesRecv are payload bytes.
	BytesSent int64 `json:"bytes_sent"`
	BytesRecv int64 `json:"bytes_recv"`
	// MsgsSent and MsgsRecv are message counts (one header each).
	MsgsSent int64 `json:"msgs_sent"`
	MsgsRecv int64 `json:"msgs_recv"`
}

// Add returns the sum of t and u.
func (t Traffic) Add(u Traffic) Traffic {
	return Traffic{t.BytesSent + u.BytesSent, t.BytesRecv + u.BytesRecv, t.MsgsSent + u.MsgsSent, t.MsgsRecv + u.MsgsRecv}
}

// PeerTraffic is the traffic of one phase, indexed by peer rank (this
// rank's own entry is always zero).
type PeerTraffic []Traffic

// Total sums over peers.
func (p PeerTraffic) Total() Traffic {
	var t Traffic
	for _, u := range p {
		t = t.Add(u)
	}
	return t
}

// Counters is a snapshot of the byte counters: phase name → per-peer
// traffic. The phase before any SetPhase is "".
type Counters map[string]PeerTraffic

// Total sums over phases and peers.
func (c Counters) Total() Traffic {
	var t Traffic
	for _, p := range c {
		t = t.Add(p.Total())
	}
	return t
}

type peerCounter struct {
	bytesSent, bytesRecv, msgsSent, msgsRecv atomic.Int64
}

type phaseCounters struct {
	name  string
	peers []peerCounter
}

type counterSet struct {
	mu     sync.Mutex
	world  int
	phases map[string]*phaseCounters
	cur    atomic.Pointer[phaseCounters]
}

func (c *counterSet) init(world int) {
	c.world = world
	c.phases = map[string]*phaseCounters{}
	c.set("")
}

func (c *counterSet) get(name string) *phaseCounters {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.phases[name]
	if p == nil {
		p = &phaseCounters{name: name, peers: make([]peerCounter, c.world)}
		c.phases[name] = p
	}
	return p
}

func (c *counterSet) set(name string) { c.cur.Store(c.get(name)) }

// SetPhase names the phase that the following Send and Recv calls count
// under (and that their errors name, e.g. "recv reduce-scatter"). It is
// mesh-wide: set it from the goroutine that drives the operations. The
// collectives use Phase handles instead, named "reduce-scatter",
// "allgather", "broadcast", "alltoall" and "barrier".
func (m *Mesh) SetPhase(name string) { m.counters.set(name) }

// CurrentPhase returns the name of the phase Send and Recv count under.
func (m *Mesh) CurrentPhase() string { return m.counters.cur.Load().name }

// Counters returns a snapshot of the byte counters per phase per peer.
// The counters are atomic; a snapshot taken while operations run may be
// mid-operation.
func (m *Mesh) Counters() Counters {
	m.counters.mu.Lock()
	defer m.counters.mu.Unlock()
	out := make(Counters, len(m.counters.phases))
	for name, p := range m.counters.phases {
		pt := make(PeerTraffic, len(p.peers))
		for i := range p.peers {
			c := &p.peers[i]
			pt[i] = Traffic{c.bytesSent.Load(), c.bytesRecv.Load(), c.msgsSent.Load(), c.msgsRecv.Load()}
		}
		out[name] = pt
	}
	return out
}

// ResetCounters zeroes every counter (phases are kept).
func (m *Mesh) ResetCounters() {
	m.counters.mu.Lock()
	defer m.counters.mu.Unlock()
	for _, p := range m.counters.phases {
		for i := range p.peers {
			c := &p.peers[i]
			c.bytesSent.Store(0)
			c.bytesRecv.Store(0)
			c.msgsSent.Store(0)
			c.msgsRecv.Store(0)
		}
	}
}
