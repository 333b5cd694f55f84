package engine

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"trainwire.dev/lib/mesh"
)

// transport moves straggle messages over a mesh: one reader goroutine per
// peer drains everything that peer sends (so no send ever waits on the
// receiver's progress), data chunks go to a mailbox keyed by (round,
// epoch, step, sender), where they wait if they arrive early, and control
// messages go to the controller's or the worker's inbox.
type transport struct {
	m     *mesh.Mesh
	rank  int
	world int
	max   int // largest message accepted

	ctrlIn   chan Msg // for the controller role on this rank
	workerIn chan Msg // for the worker role

	mu      sync.Mutex
	boxes   map[mkey]chan []byte
	dead    map[int]chan struct{} // closed when a rank is known dead
	deadErr map[int]error
	stop    chan struct{}
	stopped sync.Once
	wg      sync.WaitGroup
	onDead  func(rank int, err error)
	// jitter, if set (tests), delays every message before it is sent.
	jitter func() time.Duration
}

type mkey struct {
	round uint64
	epoch uint32
	step  uint32
	from  int
}

func newTransport(m *mesh.Mesh, maxBytes int, onDead func(int, error)) *transport {
	t := &transport{
		m: m, rank: m.Rank(), world: m.World(), max: maxBytes,
		ctrlIn: make(chan Msg, 4096), workerIn: make(chan Msg, 4096),
		boxes: map[mkey]chan []byte{}, dead: map[int]chan struct{}{}, deadErr: map[int]error{},
		stop: make(chan struct{}), onDead: onDead,
	}
	for r := range t.world {
		t.dead[r] = make(chan struct{})
	}
	for r := range t.world {
		if r == t.rank {
			continue
		}
		t.wg.Go(func() { t.read(r) })
	}
	return t
}

// read serves one peer until it dies or the transport stops.
func (t *transport) read(peer int) {
	for {
		tag, b, err := t.m.RecvAny(peer, t.max)
		if err != nil {
			select {
			case <-t.stop:
				return
			default:
			}
			t.markDead(peer, err)
			return
		}
		msg, err := Decode(tag, b, t.world)
		if err != nil {
			t.markDead(peer, fmt.Errorf("rank %d sent a bad message: %w", peer, err))
			return
		}
		msg.From = peer
		t.deliver(msg)
	}
}

func (t *transport) deliver(msg Msg) {
	switch msg.Kind {
	case KindData:
		// Never block the reader: a second chunk under the same key is a
		// stale attempt's resend, and is dropped.
		select {
		case t.box(mkey{msg.Round, msg.Epoch, msg.Step, msg.From}) <- msg.Data:
		default:
		}
	case KindAck, KindDone, KindFail, KindEnd, KindState, KindProfile, KindPush:
		select {
		case t.ctrlIn <- msg:
		case <-t.stop:
		}
	default:
		select {
		case t.workerIn <- msg:
		case <-t.stop:
		}
	}
}

// box returns the one-slot mailbox of k, creating it.
func (t *transport) box(k mkey) chan []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.boxes[k]
	if !ok {
		c = make(chan []byte, 1)
		t.boxes[k] = c
	}
	return c
}

// markDead records that rank r is gone (once) and tells the engine.
func (t *transport) markDead(r int, err error) {
	t.mu.Lock()
	ch := t.dead[r]
	select {
	case <-ch:
		t.mu.Unlock()
		return
	default:
	}
	t.deadErr[r] = err
	close(ch)
	t.mu.Unlock()
	if t.onDead != nil {
		t.onDead(r, err)
	}
}

func (t *transport) isDead(r int) bool {
	select {
	case <-t.dead[r]:
		return true
	default:
		return false
	}
}

// errCancelled is returned by a ring attempt superseded by a newer epoch
// or the end of the run.
var errCancelled = errors.New("cancelled")

// recvData waits for the chunk k.
func (t *transport) recvData(k mkey, cancel <-chan struct{}, timeout time.Duration) ([]byte, error) {
	c := t.box(k)
	tm := time.NewTimer(timeout)
	defer tm.Stop()
	select {
	case b := <-c:
		t.mu.Lock()
		delete(t.boxes, k)
		t.mu.Unlock()
		return b, nil
	case <-t.dead[k.from]:
		return nil, &mesh.PeerError{Rank: k.from, Op: "ring", Err: t.deadErr[k.from], Peer: k.from, ReportedBy: -1}
	case <-cancel:
		return nil, errCancelled
	case <-t.stop:
		return nil, errCancelled
	case <-tm.C:
		return nil, &mesh.PeerError{Rank: k.from, Op: "ring", Err: fmt.Errorf("no chunk for round %d step %d within %v", k.round, k.step, timeout), Peer: k.from, ReportedBy: -1}
	}
}

// send sends msg to rank to; to this rank itself it is delivered locally.
func (t *transport) send(to int, msg Msg) error {
	if to == t.rank {
		msg.From = t.rank
		t.deliver(msg)
		return nil
	}
	if t.jitter != nil {
		time.Sleep(t.jitter())
	}
	if t.isDead(to) {
		return &mesh.PeerError{Rank: to, Op: "send " + msg.Kind.String(), Err: errors.New("dead"), Peer: to, ReportedBy: -1}
	}
	err := t.m.Send(to, Tag(msg.Kind), msg.Encode(nil))
	if err != nil {
		t.markDead(to, err)
	}
	return err
}

// gc drops the mailboxes of rounds before round.
func (t *transport) gc(round uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k := range t.boxes {
		if k.round < round {
			delete(t.boxes, k)
		}
	}
}

// close stops the transport; nil (allreduce mode has none) is a no-op,
// so that a job aborted under the blocking mode fails its engine instead
// of crashing it.
func (t *transport) close() {
	if t == nil {
		return
	}
	t.stopped.Do(func() { close(t.stop) })
}
