package collective

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"trainwire.dev/lib/mesh"
)

// opAllToAllAsync is the tag operation code of the asynchronous alltoalls
// (distinct from the synchronous opAllToAll, so a rank in one and a rank
// in the other detect it at the first message).
const opAllToAllAsync = 0x21

// LengthBytes is the size of the length that goes in front of every part
// of a StartAllToAll (under the mesh phase "alltoall-lengths").
const LengthBytes = 8

// AllToAllVAsync has AllToAllVBytes's contract and results (the same
// bytes land in the same places), but it is Sven's scatter-based alltoall
// (docs/sven.md): every peer's part is received on a goroutine of its own
// as soon as it comes, in no fixed order, and this rank's parts go out at
// once, one after the other in rotation order (rank+1, rank+2, …), on one
// goroutine that never waits for a receive; there are no rounds, so a
// rank that arrives late delays only the parts it sends and receives.
// One part at a time per sender keeps the senders spread over the
// receivers (all at once is TCP incast on a rate-limited link). It
// returns when every part has been sent and received. Payload bytes are
// counted under the mesh phase "alltoall", as for AllToAllVBytes, so both
// have the volumes of docs/sven.md (V.1).
func (c *Comm) AllToAllVAsync(ctx context.Context, send []byte, sendCounts []int, recv []byte, recvCounts []int) error {
	const name = "alltoall-async"
	n, r := c.m.World(), c.m.Rank()
	so, ro, err := a2aLocal(name, r, n, send, sendCounts, recv, recvCounts)
	if err != nil {
		return err
	}
	if n == 1 {
		return ctx.Err()
	}
	stop, err := c.guard(ctx, name)
	if err != nil {
		return err
	}
	defer stop()
	tag := c.tag(opAllToAllAsync)
	var g errGroup
	for s := 1; s < n; s++ {
		from := mod(r-s, n)
		g.Go(func() error { return c.a2a.Recv(from, tag, recv[ro[from]:ro[from+1]]) })
	}
	g.Go(func() error {
		for s := 1; s < n; s++ {
			to := mod(r+s, n)
			if err := c.a2a.Send(to, tag, send[so[to]:so[to+1]]); err != nil {
				return err
			}
		}
		return nil
	})
	return wrap(name, g.Wait())
}

// a2aLocal checks an alltoallv's counts against the world and the
// buffers, copies this rank's own part and returns the prefix sums; both
// alltoallvs (AllToAllVBytes, AllToAllVAsync) start with it.
func a2aLocal(name string, r, n int, send []byte, sendCounts []int, recv []byte, recvCounts []int) (so, ro []int, err error) {
	if len(sendCounts) != n || len(recvCounts) != n {
		return nil, nil, fmt.Errorf("collective: %s: %d send and %d receive counts for a world of %d", name, len(sendCounts), len(recvCounts), n)
	}
	if so, err = offsets(sendCounts); err != nil {
		return nil, nil, fmt.Errorf("collective: %s: send: %w", name, err)
	}
	if ro, err = offsets(recvCounts); err != nil {
		return nil, nil, fmt.Errorf("collective: %s: receive: %w", name, err)
	}
	if so[n] != len(send) || ro[n] != len(recv) {
		return nil, nil, fmt.Errorf("collective: %s: counts sum to %d and %d bytes, buffers hold %d and %d", name, so[n], ro[n], len(send), len(recv))
	}
	if sendCounts[r] != recvCounts[r] {
		return nil, nil, fmt.Errorf("collective: %s: rank %d sends itself %d bytes but expects %d", name, r, sendCounts[r], recvCounts[r])
	}
	copy(recv[ro[r]:ro[r+1]], send[so[r]:so[r+1]])
	return so, ro, nil
}

// errGroup runs functions on goroutines and keeps the most telling error:
// a *mesh.PeerError (which names the failed rank) over any other.
type errGroup struct {
	wg  sync.WaitGroup
	mu  sync.Mutex
	err error
}

// Go runs f on a goroutine of its own.
func (g *errGroup) Go(f func() error) {
	g.wg.Go(func() {
		if err := f(); err != nil {
			g.mu.Lock()
			if g.err == nil || (!isPeer(g.err) && isPeer(err)) {
				g.err = err
			}
			g.mu.Unlock()
		}
	})
}

// Wait waits for every function and returns the error kept.
func (g *errGroup) Wait() error {
	g.wg.Wait()
	return g.err
}

// AsyncAllToAll is one asynchronous alltoall with parts of any size, from
// StartAllToAll: Post sends a part the moment the caller has it, and the
// parts from every peer are received meanwhile, on goroutines of their
// own, into buffers of their own (the chapter's listening thread and
// temporary memory). Each part is an 8-byte little-endian length (phase
// "alltoall-lengths") then the payload (phase "alltoall"), so the
// receiver needs no sizes in advance; a length above the bound is refused
// before anything is allocated, naming the peer.
//
// Post must be called exactly once per rank, this rank included (its own
// part is kept, not sent), from one goroutine; then Wait. The Comm must
// not run another collective until Wait has returned.
type AsyncAllToAll struct {
	c      *Comm
	name   string
	tag    uint32
	max    int
	lens   *mesh.Phase
	parts  [][]byte
	posted []bool
	sends  errGroup
	queue  chan func() error // the sends, in the order posted, on one goroutine
	recvs  errGroup
	stop   func()
	err    error
}

// StartAllToAll starts an asynchronous alltoall whose parts hold at most
// maxPart bytes each, and starts receiving from every peer at once.
func (c *Comm) StartAllToAll(ctx context.Context, maxPart int) (*AsyncAllToAll, error) {
	const name = "alltoall-async"
	if maxPart < 0 {
		return nil, fmt.Errorf("collective: %s: negative part bound %d", name, maxPart)
	}
	n, r := c.m.World(), c.m.Rank()
	a := &AsyncAllToAll{c: c, name: name, max: maxPart, lens: c.m.Phase("alltoall-lengths"),
		parts: make([][]byte, n), posted: make([]bool, n), stop: func() {}}
	if n == 1 {
		return a, ctx.Err()
	}
	stop, err := c.guard(ctx, name)
	if err != nil {
		return nil, err
	}
	a.stop = stop
	a.tag = c.tag(opAllToAllAsync)
	a.queue = make(chan func() error, n)
	a.sends.Go(func() error {
		var err error
		for send := range a.queue {
			if err == nil {
				err = send()
			}
		}
		return err
	})
	for s := 1; s < n; s++ {
		from := mod(r-s, n)
		a.recvs.Go(func() error { return a.recv(from) })
	}
	return a, nil
}

func (a *AsyncAllToAll) recv(from int) error {
	var hdr [LengthBytes]byte
	if err := a.lens.Recv(from, a.tag, hdr[:]); err != nil {
		return err
	}
	size := binary.LittleEndian.Uint64(hdr[:])
	if size > uint64(a.max) {
		err := fmt.Errorf("rank %d announced a part of %d bytes, more than the bound of %d", from, size, a.max)
		a.c.m.Abort(fmt.Errorf("%s: %w", a.name, err))
		return err
	}
	b := make([]byte, size)
	if err := a.c.a2a.Recv(from, a.tag, b); err != nil {
		return err
	}
	a.parts[from] = b
	return nil
}

// Post queues part for rank peer (keeps it, for this rank) and returns
// at once: one goroutine sends the parts in the order posted (post in
// rotation order, rank+1 first, to spread the senders over the
// receivers); part must not change until Wait
// returns. A part over the bound, a rank out of range or a second Post to
// the same rank is an error, which Wait returns too.
func (a *AsyncAllToAll) Post(peer int, part []byte) error {
	n, r := a.c.m.World(), a.c.m.Rank()
	switch {
	case peer < 0 || peer >= n:
		a.err = fmt.Errorf("collective: %s: post to rank %d in a world of %d", a.name, peer, n)
	case a.posted[peer]:
		a.err = fmt.Errorf("collective: %s: second post to rank %d", a.name, peer)
	case len(part) > a.max:
		a.err = fmt.Errorf("collective: %s: part for rank %d has %d bytes, more than the bound of %d", a.name, peer, len(part), a.max)
	}
	if a.err != nil {
		if n > 1 {
			a.c.m.Abort(a.err)
		}
		return a.err
	}
	a.posted[peer] = true
	if peer == r {
		a.parts[r] = append([]byte(nil), part...)
		return nil
	}
	a.queue <- func() error {
		var hdr [LengthBytes]byte
		binary.LittleEndian.PutUint64(hdr[:], uint64(len(part)))
		if err := a.lens.Send(peer, a.tag, hdr[:]); err != nil {
			return err
		}
		return a.c.a2a.Send(peer, a.tag, part)
	}
	return nil
}

// Wait waits until every part has been sent and every peer's part
// received, and returns the parts by source rank (parts[r] is this rank's
// own). Every rank must have been posted to.
func (a *AsyncAllToAll) Wait() ([][]byte, error) {
	defer a.stop()
	if a.err == nil {
		for k, ok := range a.posted {
			if !ok {
				a.err = fmt.Errorf("collective: %s: nothing posted to rank %d", a.name, k)
				if len(a.posted) > 1 {
					a.c.m.Abort(a.err)
				}
				break
			}
		}
	}
	if a.queue != nil {
		close(a.queue)
	}
	serr, rerr := a.sends.Wait(), a.recvs.Wait()
	err := rerr
	if err == nil || (!isPeer(err) && isPeer(serr)) {
		err = serr
	}
	if err != nil {
		return nil, wrap(a.name, err)
	}
	if a.err != nil {
		return nil, a.err
	}
	return a.parts, nil
}
