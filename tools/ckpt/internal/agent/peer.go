package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/store"
)

const authKind = "ckpt"

// dial connects to rank to and proves the job token.
func (a *Agent) dial(ctx context.Context, to int) (*conn, error) { return a.dialBuf(ctx, to, 4<<20) }

// dialBuf is dial with a socket send buffer of sndbuf bytes.
func (a *Agent) dialBuf(ctx context.Context, to int, sndbuf int) (*conn, error) {
	addr := a.cfg.Peers[to]
	d := net.Dialer{Timeout: a.cfg.Timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("rank %d (%s): connect: %w", to, addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(sndbuf)
		_ = tc.SetReadBuffer(4 << 20)
	}
	if _, err := mesh.AuthClient(c, a.cfg.Token, mesh.AuthHello{Kind: authKind, Run: a.cfg.Run, From: a.cfg.Rank, To: to, World: a.cfg.World}, time.Now().Add(a.cfg.Timeout)); err != nil {
		c.Close()
		return nil, fmt.Errorf("rank %d (%s): handshake: %w", to, addr, err)
	}
	return a.peerConn(c, to), nil
}

// peerConn wraps an authenticated connection to or from rank r: every
// message carries the recovery state both ways (not for a passive agent).
func (a *Agent) peerConn(c net.Conn, r int) *conn {
	cn := newConn(c, a.lim, a.cfg.Timeout, fmt.Sprintf("rank %d", r))
	if !a.passive {
		cn.stamp = a.stamp
		cn.observe = func(m map[string]string) { a.observe(r, m) }
	}
	return cn
}

// servePeer authenticates a peer's connection and serves its requests.
func (a *Agent) servePeer(c net.Conn) {
	h, err := mesh.AuthServer(c, a.cfg.Token, a.cfg.Rank, a.cfg.Run, time.Now().Add(a.cfg.Timeout), func(h mesh.AuthHello) error {
		switch {
		case h.Kind != authKind:
			return fmt.Errorf("this is a ckpt agent (rank %d), not a %q endpoint", a.cfg.Rank, h.Kind)
		case h.World != a.cfg.World:
			return fmt.Errorf("world size mismatch: rank %d has %d ranks, the client %d", a.cfg.Rank, a.cfg.World, h.World)
		case h.From < 0 || h.From >= a.cfg.World:
			return fmt.Errorf("client claims rank %d, outside world %d", h.From, a.cfg.World)
		case h.To != a.cfg.Rank:
			return fmt.Errorf("this is rank %d, not rank %d (stale address list?)", a.cfg.Rank, h.To)
		}
		return nil
	})
	if err != nil {
		a.log.Warn("refused a peer connection", "from", c.RemoteAddr().String(), "err", err)
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4 << 20)
		_ = tc.SetWriteBuffer(4 << 20)
	}
	cn := a.peerConn(c, h.From)
	for {
		meta, err := cn.header(0)
		if err != nil {
			return // the peer closed the connection (or died)
		}
		switch op := meta[kOp]; op {
		case "replicate":
			a.recvReplica(cn, meta, h.From)
			return
		case "fetch":
			if err := a.serveFetch(cn, meta); err != nil {
				a.log.Warn("fetch for a peer failed", "peer", h.From, "err", err)
				return
			}
		case "inventory":
			if _, err := cn.rest(); err != nil {
				return
			}
			if err := cn.send(a.inventoryMeta(), a.inventoryFrames()...); err != nil {
				return
			}
		case "done":
			if _, err := cn.rest(); err != nil {
				return
			}
			owner, err1 := metaInt(meta, kOwner)
			iter, err2 := metaInt(meta, kIter)
			epoch, err3 := metaInt(meta, kAttempt)
			if err := errors.Join(err1, err2, err3); err != nil || owner != int64(h.From) {
				_ = cn.sendError("bad_input", fmt.Errorf("bad done message from rank %d: %v", h.From, err))
				return
			}
			a.markDone(int(owner), iter, epoch)
			if err := cn.send(map[string]string{kOp: "ok"}); err != nil {
				return
			}
		case "hello", "abort":
			// The recovery state in the header did the work (observe).
			if _, err := cn.rest(); err != nil {
				return
			}
			if err := cn.send(map[string]string{kOp: "ok"}); err != nil {
				return
			}
		default:
			_ = cn.sendError("bad_input", fmt.Errorf("unknown operation %q", op))
			return
		}
	}
}

func (a *Agent) inventoryMeta() map[string]string {
	c, ce := a.st.CommittedAt()
	return map[string]string{kOp: "inventory", kCommitted: itoa(c), kCommittedEpoch: itoa(ce), kRank: itoa(int64(a.cfg.Rank))}
}

// inventoryFrames lists the complete versions as stats frames.
func (a *Agent) inventoryFrames() []wire.Frame {
	var out []wire.Frame
	for _, in := range a.st.Inventory() {
		if in.State != store.Complete.String() {
			continue
		}
		out = append(out, &wire.Stats{Tool: "ckpt", Name: "version", Step: in.Iter, Rank: int64(in.Owner),
			Values: map[string]float64{"len": float64(in.Len)},
			Labels: map[string]string{"xxh3": hex(in.XXH3), "format": in.Format, kAttempt: itoa(in.Epoch)}})
	}
	return out
}

// recvReplica receives one replica of owner's shard from rank from: it
// grants Parts credits, stages each chunk (CRC32C checked by the reader),
// copies it into the in-progress version while the next one arrives, and
// seals the version only when every byte arrived and the shard's digest
// matches. Anything else leaves the version failed, never complete, and
// the committed one untouched.
func (a *Agent) recvReplica(cn *conn, meta map[string]string, from int) {
	if _, err := cn.rest(); err != nil {
		a.log.Warn("replicate request", "from", from, "err", err)
		return
	}
	owner, e1 := metaInt(meta, kOwner)
	iter, e2 := metaInt(meta, kIter)
	size, e3 := metaInt(meta, kLen)
	sum, e4 := metaUint(meta, kXXH3)
	epoch, e5 := metaInt(meta, kAttempt)
	if err := errors.Join(e1, e2, e3, e4, e5); err != nil {
		_ = cn.sendError("bad_input", fmt.Errorf("replicate from rank %d: %v", from, err))
		return
	}
	if int(owner) != from {
		_ = cn.sendError("bad_input", fmt.Errorf("rank %d may only replicate its own shard, not rank %d's", from, owner))
		return
	}
	holds := false
	for _, h := range a.holders(int(owner))[1:] {
		if h == a.cfg.Rank {
			holds = true
		}
	}
	if !holds {
		_ = cn.sendError("bad_input", fmt.Errorf("rank %d does not hold rank %d's shard under this placement (m=%d)", a.cfg.Rank, owner, a.cfg.M))
		return
	}
	log := a.log.With("owner", owner, "iter", iter, "from", from, "attempt_epoch", epoch)
	if cur := a.currentEpoch(); epoch < cur {
		_ = cn.sendError("abandoned", fmt.Errorf("rank %d: iteration %d of rank %d (epoch %d) was abandoned: this agent is in recovery epoch %d", a.cfg.Rank, iter, owner, epoch, cur))
		return
	}
	v, err := a.st.Begin(int(owner), iter, epoch, size, meta[kFormat], a.cfg.Timeout)
	if err != nil {
		log.Warn("refused a replica", "err", err)
		_ = cn.sendError("refused", fmt.Errorf("rank %d: %w", a.cfg.Rank, err))
		return
	}
	var wmu sync.Mutex
	w := cn.writer(map[string]string{kOp: "credits"})
	credit := func(n int) error {
		wmu.Lock()
		defer wmu.Unlock()
		cn.arm()
		if err := w.Write(&wire.Stats{Tool: "ckpt", Name: "credit", Rank: int64(a.cfg.Rank), Values: map[string]float64{"n": float64(n)}}); err != nil {
			return err
		}
		return w.Flush()
	}
	fail := func(err error) {
		a.st.Abort(v)
		atomic.AddInt64(&a.stats.ReplicationsFailed, 1)
		log.Warn("replica discarded: the in-progress copy is failed, the committed one is untouched", "err", err)
		wmu.Lock()
		_ = w.Write(&wire.Error{Code: "replica_failed", Msg: err.Error(), Rank: int64(a.cfg.Rank), Frame: -1})
		_ = w.Close()
		_ = cn.flush()
		wmu.Unlock()
	}
	if err := credit(a.cfg.Parts); err != nil {
		fail(err)
		return
	}
	// Chunks arrive straight into the version (R/p windows of it stand for
	// the sub-buffers), are checked slice by slice as they arrive (CRC32C
	// and the shard's XXH3), and each chunk's credit goes back once it
	// passed; the sender has p chunks in flight meanwhile (pipelining).
	rr := &rawReader{cn: cn, dst: v.Data(), limit: a.Chunk(),
		verified: func(off, n int64) error { return credit(1) },
		onRecv: func(off, n int64) {
			atomic.AddInt64(&a.stats.BytesReceived, n)
			atomic.AddInt64(&a.stats.ChunksRecv, 1)
			a.tl.event("recv", a.cfg.Rank, "from", from, "iter", iter, "off", off, "size", n, "t1", time.Now())
		}}
	if rerr := rr.Read(); rerr != nil {
		if errors.Is(rerr, errRawCRC) {
			atomic.AddInt64(&a.stats.CRCFailures, 1)
		}
		fail(rerr)
		return
	}
	if err := a.st.SealHashed(v, rr.Sum, sum); err != nil {
		atomic.AddInt64(&a.stats.ReplicationsFailed, 1)
		log.Warn("replica discarded", "err", err)
		wmu.Lock()
		_ = w.Write(&wire.Error{Code: "replica_failed", Msg: err.Error(), Rank: int64(a.cfg.Rank), Frame: -1})
		_ = w.Close()
		_ = cn.flush()
		wmu.Unlock()
		return
	}
	atomic.AddInt64(&a.stats.ReplicationsOK, 1)
	log.Debug("replica complete", "bytes", size)
	wmu.Lock()
	_ = w.Write(&wire.Stats{Tool: "ckpt", Name: "sealed", Step: iter, Rank: int64(a.cfg.Rank), Values: map[string]float64{"len": float64(size)}})
	_ = w.Close()
	_ = cn.flush()
	wmu.Unlock()
}

// sendReplica sends v (this rank's complete shard) to rank to, chunk by
// chunk as credits come back, and waits for the receiver to seal it.
//
// pieces are the chunks in order (plan); base and seq are the start and
// tick number of the iteration their spans refer to (zero: send as
// credits allow). Interleaved chunks wait for their idle span, and while
// the trainer reports a communication op under way, no byte is written.
//
// crcs are the CRC32C of the shard's R/p grid (hashGrid; nil: unknown).
func (a *Agent) sendReplica(ctx context.Context, to int, v *store.Version, pieces []piece, base time.Time, seq int64, crcs []uint32) error {
	rs := &replicaSend{a: a, ctx: ctx, to: to, v: v, base: base, seq: seq, crcs: crcs,
		scheduled: a.cfg.Interleave != nil && !base.IsZero()}
	sndbuf := 4 << 20
	if rs.scheduled {
		// A small socket buffer: what is written but not yet on the wire
		// when a training comm op starts (≈ 4 ms at B) is all that can
		// overlap it.
		sndbuf = max(32<<10, int(a.cfg.Interleave.Bandwidth*0.004))
	}
	cn, err := a.dialBuf(ctx, to, sndbuf)
	if err != nil {
		return err
	}
	defer cn.Close()
	stop := context.AfterFunc(ctx, func() { cn.Close() })
	defer stop()
	rs.cn, rs.rw = cn, &rawWriter{cn: cn}
	rs.credits, rs.result = make(chan int, 1<<16), make(chan error, 1)
	go rs.readAcks()
	meta := map[string]string{kOp: "replicate", kJob: a.cfg.Run, kOwner: itoa(int64(a.cfg.Rank)), kIter: itoa(v.Iter),
		kLen: itoa(v.Len), kXXH3: hex(v.XXH3), kFormat: v.Format, kAttempt: itoa(v.Epoch)}
	if err := cn.send(meta); err != nil {
		return err
	}
	var sent int64
	for _, p := range pieces {
		if err := rs.waitCredit(); err != nil {
			return err
		}
		if err := rs.sendPiece(p); err != nil {
			return err
		}
		sent += p.size
		rs.have--
	}
	if err := rs.rw.end(sent, v.Len); err != nil {
		return err
	}
	select {
	case err := <-rs.result:
		return err
	case <-time.After(2 * a.cfg.Timeout):
		return fmt.Errorf("%s: did not confirm the replica within %v", cn.who, 2*a.cfg.Timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// replicaSend is one replica on its way to a peer: the connection, the
// receiver's credits and verdict (read by readAcks), and the schedule its
// chunks follow.
type replicaSend struct {
	a         *Agent
	ctx       context.Context
	to        int
	v         *store.Version
	base      time.Time // the iteration's start (zero: unscheduled)
	seq       int64
	crcs      []uint32
	scheduled bool // interleaved with training: chunks wait for idle spans
	// unscheduled is set once the trainer stops ticking: the rest goes as
	// credits allow.
	unscheduled bool
	cn          *conn
	rw          *rawWriter
	credits     chan int
	result      chan error
	have        int // credits in hand
}

// readAcks reads the receiver's side of the exchange: credits, then the
// seal (nil on result) or an error.
func (rs *replicaSend) readAcks() {
	cn := rs.cn
	rm, err := cn.header(rs.a.cfg.Timeout)
	if err == nil && rm[kOp] == "error" {
		_, _ = cn.rest()
		err = &RemoteError{Who: cn.who, Code: rm[kCode], Msg: rm[kMsg]}
	}
	for err == nil {
		var f wire.Frame
		f, err = cn.nextWithin(0) // the sender's own deadlines bound the wait
		if err != nil {
			break
		}
		switch f := f.(type) {
		case *wire.Stats:
			if f.Name == "credit" {
				rs.credits <- int(f.Values["n"])
			} else if f.Name == "sealed" {
				rs.result <- nil
				return
			}
		case *wire.Error:
			err = fmt.Errorf("%s: %s", cn.who, f.Msg)
		case *wire.End:
			err = fmt.Errorf("%s: ended the exchange without sealing the replica", cn.who)
		}
	}
	rs.result <- err
	close(rs.credits)
}

// waitCredit waits until the receiver has room for one more chunk.
func (rs *replicaSend) waitCredit() error {
	for rs.have == 0 {
		select {
		case c, ok := <-rs.credits:
			if !ok {
				return <-rs.result
			}
			rs.have += c
		case err := <-rs.result:
			if err == nil {
				err = fmt.Errorf("%s sealed before all chunks were sent", rs.cn.who)
			}
			return err
		case <-time.After(rs.a.cfg.Timeout):
			return fmt.Errorf("%s: no credit for %v (receiver hung, stopped or died?)", rs.cn.who, rs.a.cfg.Timeout)
		case <-rs.ctx.Done():
			return rs.ctx.Err()
		}
	}
	return nil
}

// sendPiece writes one chunk when its span comes (scheduled) and the pace
// allows, with its grid CRC when it is one whole grid cell.
func (rs *replicaSend) sendPiece(p piece) error {
	a, v := rs.a, rs.v
	if p.at >= 0 && !rs.base.IsZero() && !rs.unscheduled {
		switch err := a.tick.waitSpan(rs.ctx, rs.seq, p.span, rs.base.Add(p.at), min(a.cfg.Timeout/2, 10*time.Second)); {
		case errors.Is(err, errGaveUp):
			rs.unscheduled = true
		case err != nil:
			return err
		}
	}
	if a.cfg.Pace != nil {
		if err := a.cfg.Pace(rs.ctx, rs.to, p.off, p.size); err != nil {
			return err
		}
	}
	t0 := time.Now()
	crc, grid := int64(-1), a.Chunk()
	if k := p.off / grid; p.off%grid == 0 && k < int64(len(rs.crcs)) && p.size == min(grid, v.Len-p.off) {
		crc = int64(rs.crcs[k])
	}
	var gate func() error
	slice := 0
	if rs.scheduled {
		gate, slice = rs.gate, 64<<10
	}
	if err := rs.rw.chunk(p.off, v.Len, v.Data()[p.off:p.off+p.size], crc, gate, slice); err != nil {
		return err
	}
	if a.tl.on() {
		at := int64(-1)
		if p.at >= 0 && !rs.base.IsZero() {
			at = rs.base.Add(p.at).UnixNano()
		}
		a.tl.event("send", a.cfg.Rank, "to", rs.to, "iter", v.Iter, "off", p.off, "size", p.size, "span", p.span, "at", at, "t0", t0, "t1", time.Now())
	}
	atomic.AddInt64(&a.stats.BytesSent, p.size)
	atomic.AddInt64(&a.stats.ChunksSent, 1)
	return nil
}

// gate holds a scheduled chunk's next slice while the trainer reports a
// communication op under way (the pause is on the timeline).
func (rs *replicaSend) gate() error {
	a := rs.a
	t0 := time.Now()
	err := a.tick.gate(rs.ctx, a.cfg.Timeout/2)
	if t1 := time.Now(); a.tl.on() && t1.Sub(t0) > time.Millisecond {
		a.tl.event("pause", a.cfg.Rank, "to", rs.to, "iter", rs.v.Iter, "t0", t0, "t1", t1)
	}
	return err
}

// serveFetch sends a complete version to a peer that restores from it.
func (a *Agent) serveFetch(cn *conn, meta map[string]string) error {
	if _, err := cn.rest(); err != nil {
		return err
	}
	owner, e1 := metaInt(meta, kOwner)
	iter, e2 := metaInt(meta, kIter)
	if err := errors.Join(e1, e2); err != nil {
		return cn.sendError("bad_input", err)
	}
	epoch := int64(store.AnyEpoch)
	if e, err := metaInt(meta, kAttempt); err == nil {
		epoch = e
	}
	v := a.st.Get(int(owner), iter, epoch)
	if v == nil {
		return cn.sendError("missing", fmt.Errorf("rank %d holds no complete copy of rank %d's iteration %d", a.cfg.Rank, owner, iter))
	}
	defer a.st.Unpin(v)
	return a.sendChunks(cn, map[string]string{kOp: "shard", kOwner: itoa(owner), kIter: itoa(iter), kAttempt: itoa(v.Epoch), kLen: itoa(v.Len), kXXH3: hex(v.XXH3), kFormat: v.Format}, v)
}

// sendChunks writes meta, then v's bytes as raw chunk records of R/p
// (straight from the version, one writev each) and the end record.
func (a *Agent) sendChunks(cn *conn, meta map[string]string, v *store.Version) error {
	if err := cn.send(meta); err != nil {
		return err
	}
	rw := &rawWriter{cn: cn}
	data := v.Data()
	chunk := a.Chunk()
	for off := int64(0); off < v.Len; off += chunk {
		n := min(chunk, v.Len-off)
		if err := rw.chunk(off, v.Len, data[off:off+n], -1, nil, 0); err != nil {
			return err
		}
	}
	return rw.end(v.Len, v.Len)
}

// peerInventory is what one peer reported.
type peerInventory struct {
	rank int
	// committed is its committed iteration, saved in committedEpoch.
	committed, committedEpoch int64
	versions                  []store.Info
	err                       error
}

// inventories asks every other rank (in parallel) for its committed
// iteration and complete versions; unreachable ranks carry err.
func (a *Agent) inventories(ctx context.Context) []peerInventory {
	out := make([]peerInventory, a.cfg.World)
	var wg sync.WaitGroup
	for r := 0; r < a.cfg.World; r++ {
		out[r].rank = r
		if r == a.cfg.Rank {
			out[r].committed, out[r].committedEpoch = a.st.CommittedAt()
			for _, in := range a.st.Inventory() {
				if in.State == store.Complete.String() {
					out[r].versions = append(out[r].versions, in)
				}
			}
			continue
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			// Tell the peer our committed iteration as we ask for its.
			out[r] = a.askInventory(ctx, r, map[string]string{kOp: "inventory"})
		}(r)
	}
	wg.Wait()
	return out
}

// notifyDone tells every rank that this rank's shard of iter, saved in
// epoch, is complete on all its holders — unless the attempt was abandoned
// meanwhile.
func (a *Agent) notifyDone(ctx context.Context, iter, epoch int64) {
	if a.currentEpoch() != epoch {
		return
	}
	a.markDone(a.cfg.Rank, iter, epoch)
	a.broadcast(ctx, map[string]string{kOp: "done", kOwner: itoa(int64(a.cfg.Rank)), kIter: itoa(iter), kAttempt: itoa(epoch)}, func(r int, err error) {
		a.log.Warn("could not tell a rank that our shard is complete", "rank", r, "iter", iter, "err", err)
	})
}
