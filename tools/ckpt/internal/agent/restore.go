package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/safetensors"
	"trainwire.dev/tools/ckpt/internal/store"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// trainerRestore rolls the job back to its newest committed iteration
// (every uncommitted attempt on every live agent is abandoned first, so
// that nothing newer can commit behind the restore's back), finds the
// iteration to restore (C-RC-1: the latest globally committed one whose
// every shard, of the attempt that was committed, has a live holder),
// then this rank's shard in local memory, else in a peer's, and hands it
// over. It returns what the trainer holds until "release".
func (a *Agent) trainerRestore(cn *conn, meta map[string]string) (*store.Version, *store.Buffer, error) {
	if _, err := cn.rest(); err != nil {
		return nil, nil, err
	}
	var s *streamer
	if meta[kMode] == "shm" && meta[kStream] == "1" {
		s = &streamer{cn: cn}
		if _, ok := meta[kIter]; !ok || meta[kLatest] == "1" {
			s.spec = a.speculate(s)
			defer s.spec.finish()
		}
	}
	ctx, cancel := context.WithTimeout(a.ctx, 4*a.cfg.Timeout)
	defer cancel()
	// Round 1 learns the highest epoch among the live agents; round 2
	// moves every one of them past it before they report.
	a.inventories(ctx)
	a.advance(fmt.Sprintf("rank %d's trainer is restoring: the job rolls back to its last committed iteration", a.cfg.Rank))
	invs := a.inventories(ctx)
	var dead []string
	maxCommitted, maxEpoch := int64(-1), int64(-1)
	for _, in := range invs {
		if in.err != nil {
			dead = append(dead, fmt.Sprintf("rank %d (%v)", in.rank, in.err))
			continue
		}
		if in.committed > maxCommitted || (in.committed == maxCommitted && in.committedEpoch > maxEpoch) {
			maxCommitted, maxEpoch = in.committed, in.committedEpoch
		}
	}
	target, epoch := maxCommitted, maxEpoch
	if s, ok := meta[kIter]; ok && meta[kLatest] != "1" {
		it, err := metaInt(meta, kIter)
		if err != nil {
			return nil, nil, cn.sendError("bad_input", fmt.Errorf("restore: %v (%q)", err, s))
		}
		if it > maxCommitted {
			return nil, nil, cn.sendError("missing", fmt.Errorf("iteration %d is not committed (the latest committed iteration among live agents is %d); a partial checkpoint is never restored", it, maxCommitted))
		}
		if it < maxCommitted {
			epoch = fullEpoch(invs, it, a.cfg.World)
		}
		target = it
	}
	persistent := "falling back to persistent storage: none is configured (start the agents with --persistent DIR), so there is nothing to restore"
	if target < 0 {
		if a.cfg.Persistent != "" {
			return a.restorePersistent(cn, meta, fmt.Sprintf("no committed checkpoint in the memory of any live agent (unreachable: %s)", list(dead)), s)
		}
		return nil, nil, cn.sendError("missing", fmt.Errorf("no committed checkpoint in the memory of any live agent (unreachable: %s); %s", list(dead), persistent))
	}
	if epoch < 0 && target < maxCommitted {
		// An older iteration no live agent holds whole any more: evicted
		// by newer checkpoints (two versions per slot), not lost.
		if a.cfg.Persistent != "" {
			return a.restorePersistent(cn, meta, fmt.Sprintf("iteration %d is no longer held in CPU memory (evicted by newer checkpoints)", target), s)
		}
		return nil, nil, cn.sendError("missing", fmt.Errorf("iteration %d is no longer held in CPU memory (each agent keeps the committed iteration %d and the one in progress; older ones are evicted): restore it from the persistent tier (--from persistent)", target, maxCommitted))
	}
	// Every rank's shard of target must be on a live holder, or no rank
	// restores from memory (never mix iterations or attempts).
	where := holdersOf(invs, target, epoch, a.cfg.World)
	var lost []string
	for r, w := range where {
		if len(w) == 0 {
			lost = append(lost, fmt.Sprintf("rank %d (holders %v)", r, a.holders(r)))
		}
	}
	if len(lost) > 0 {
		if a.cfg.Persistent != "" {
			return a.restorePersistent(cn, meta, fmt.Sprintf("iteration %d cannot be recovered from CPU memory: no live agent holds the shard of %s", target, strings.Join(lost, ", ")), s)
		}
		return nil, nil, cn.sendError("lost", fmt.Errorf("iteration %d cannot be recovered from CPU memory: no live agent holds the shard of %s; unreachable: %s; every rank must restart from the same persistent iteration — %s",
			target, strings.Join(lost, ", "), list(dead), persistent))
	}
	if target == maxCommitted {
		a.learnCommitted(target, epoch, a.cfg.Rank)
	}
	me := a.cfg.Rank
	source := "local"
	var data []byte
	var sum uint64
	var format string
	var hv *store.Version
	var tb *store.Buffer
	// A fetch of this shard already in flight (the replacement agent's
	// heal) is waited for rather than doubled.
	key := shardKey{me, target, epoch}
	if s != nil {
		s.iter, s.committed = target, maxCommitted
	}
	release, land, err := a.claimFetch(ctx, key, s)
	got := -1
	if release != nil {
		defer func() { release(got) }()
	} else if err != nil {
		return nil, nil, cn.sendError("timeout", fmt.Errorf("iteration %d of rank %d: waiting for its copy from a peer: %w", target, me, err))
	}
	if v := a.st.Get(me, target, epoch); v != nil {
		hv, data, sum, format = v, v.Data(), v.XXH3, v.Format
		if r := a.flights.source(key); release == nil && r >= 0 {
			// This restore waited for the copy the agent was making
			// as it started: the bytes came from that peer just now.
			source = fmt.Sprintf("peer:%d", r)
		}
	} else {
		// Peer memory: a group member first, in placement order.
		cands := where[me]
		sort.SliceStable(cands, func(i, j int) bool { return a.isHolder(me, cands[i]) && !a.isHolder(me, cands[j]) })
		var errs []error
		if land == nil { // another fetch brought it, and it was evicted since
			land = newLanding()
		}
		for _, r := range cands {
			t0 := time.Now()
			var l lander = land
			if s != nil {
				l = landers{land, s}
			}
			b, in, err := a.fetch(ctx, r, me, target, epoch, l)
			if err == nil {
				d := time.Since(t0)
				a.log.Info("fetched this rank's shard from a peer", "iter", target, "from", r, "bytes", in.Len, "elapsed", d.Round(time.Millisecond),
					"MBps", int(float64(in.Len)/max(d.Seconds(), 1e-9)/1e6))
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			source, got = fmt.Sprintf("peer:%d", r), r
			// Keep it: this agent holds its rank's shard again (the next
			// restore is local, and the slot can be re-replicated).
			if v, err := a.st.Adopt(me, target, epoch, in.Len, in.XXH3, in.Format, b); err == nil {
				hv, data, sum, format = v, v.Data(), v.XXH3, v.Format
			} else {
				a.log.Debug("fetched shard kept aside, not in the store", "err", err)
				tb, data, sum, format = b, b.Bytes()[:in.Len], in.XXH3, in.Format
			}
			break
		}
		if tb == nil && hv == nil {
			if a.cfg.Persistent != "" {
				return a.restorePersistent(cn, meta, fmt.Sprintf("iteration %d of rank %d: every holder failed to send it: %v", target, me, errors.Join(errs...)), s)
			}
			return nil, nil, cn.sendError("lost", fmt.Errorf("iteration %d of rank %d: every holder failed to send it: %v; %s", target, me, errors.Join(errs...), persistent))
		}
	}
	return a.handOver(cn, meta, target, maxCommitted, source, hv, tb, data, sum, format, source != "local", s)
}

// handOver checks the shard's digest and sends it to the trainer in the
// mode asked for.
//
// verified says data was hashed against sum on its way in (a fetch from a
// peer): it is not read again; a version held in memory is. A streamed
// restore (s not nil) tells the trainer first and checks the digest while
// the trainer copies.
func (a *Agent) handOver(cn *conn, meta map[string]string, target, maxCommitted int64, source string, hv *store.Version, tb *store.Buffer, data []byte, sum uint64, format string, verified bool, s *streamer) (*store.Version, *store.Buffer, error) {
	me := a.cfg.Rank
	release := func() {
		if hv != nil {
			a.st.Unpin(hv)
		}
		if tb != nil {
			tb.Close()
		}
	}
	if s != nil {
		path := ""
		if hv != nil {
			path = hv.Path()
		} else {
			path = tb.Path()
		}
		s.iter, s.committed = target, maxCommitted
		s.announce(path, store.Info{Len: int64(len(data)), XXH3: sum, Format: format}, source, int64(len(data)))
		if !verified {
			if h := a.restoreDigest(s, hv, data); h != sum {
				release()
				return nil, nil, cn.sendError("corrupt", fmt.Errorf("iteration %d of rank %d from %s: digest %016x, commit record says %016x; what was copied out is not the checkpoint", target, me, source, h, sum))
			}
		}
		a.log.Info("restoring", "iter", target, "source", source, "bytes", len(data), "streamed", true)
		if err := s.done(); err != nil {
			release()
			return nil, nil, err
		}
		return hv, tb, nil
	}
	if !verified {
		if h := a.digestOf(hv, data); h != sum {
			release()
			return nil, nil, cn.sendError("corrupt", fmt.Errorf("iteration %d of rank %d from %s: digest %016x, commit record says %016x; refusing to hand it over", target, me, source, h, sum))
		}
	}
	a.log.Info("restoring", "iter", target, "source", source, "bytes", len(data))
	rmeta := map[string]string{kOp: "ok", kIter: itoa(target), kLen: itoa(int64(len(data))), kXXH3: hex(sum), kFormat: format, kSource: source, kCommitted: itoa(maxCommitted)}
	switch meta[kMode] {
	case "shm":
		if hv != nil {
			rmeta[kPath] = hv.Path()
		} else {
			rmeta[kPath] = tb.Path()
		}
		// Held until "release" or the connection closes.
		return hv, tb, cn.send(rmeta)
	case "frames":
		if format == FormatSafetensors {
			ds, err := safetensors.Dense(data)
			if err != nil {
				release()
				return nil, nil, cn.sendError("bad_input", err)
			}
			w := cn.writer(rmeta)
			for _, d := range ds {
				cn.arm()
				if err := w.Write(d); err != nil {
					release()
					return nil, nil, err
				}
			}
			err = w.Close()
			release()
			if err != nil {
				return nil, nil, err
			}
			return nil, nil, cn.flush()
		}
		if format != FormatWire {
			release()
			return nil, nil, cn.sendError("bad_input", fmt.Errorf("iteration %d was saved as %s bytes, not tensors; restore it as bytes or through shared memory", target, format))
		}
		r := wire.NewReader(bytes.NewReader(data), wire.Limits{MaxPayload: int64(len(data)) + 1})
		w := cn.writer(rmeta)
		var err error
		for {
			var f wire.Frame
			if f, err = r.Next(); err != nil {
				break
			}
			if err = w.Write(f); err != nil {
				break
			}
		}
		release()
		if !errors.Is(err, io.EOF) {
			return nil, nil, err
		}
		if err := w.Close(); err != nil {
			return nil, nil, err
		}
		return nil, nil, cn.flush()
	default:
		pv := &store.Version{Owner: me, Iter: target, Len: int64(len(data))}
		err := sendBytes(cn, rmeta, pv, data, a.Chunk(), a.cfg.Run, me)
		release()
		return nil, nil, err
	}
}

func (a *Agent) isHolder(owner, r int) bool {
	for _, h := range a.holders(owner) {
		if h == r {
			return true
		}
	}
	return false
}

func list(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, "; ")
}

// sendBytes writes data as one message of chunk frames.
func sendBytes(cn *conn, meta map[string]string, v *store.Version, data []byte, chunk int64, job string, rank int) error {
	w := cn.writer(meta)
	for off := int64(0); off < int64(len(data)); off += chunk {
		n := min(chunk, int64(len(data))-off)
		b := data[off : off+n]
		cn.arm()
		if err := w.Write(&wire.Chunk{Job: job, Iter: v.Iter, SrcRank: int64(rank), ReplicaOf: int64(v.Owner), Offset: off, Len: n, TotalLen: int64(len(data)), CRC32C: wire.CRC32C(b), Data: b}); err != nil {
			return cn.wrap("send", err)
		}
	}
	if err := w.Close(); err != nil {
		return cn.wrap("send", err)
	}
	return cn.flush()
}

// fetch pulls owner's shard of iter from rank r into a new buffer and
// checks its digest.
//
// l, if not nil, hears where the bytes land and how many have arrived.
func (a *Agent) fetch(ctx context.Context, r, owner int, iter, epoch int64, l lander) (*store.Buffer, store.Info, error) {
	cn, err := a.dial(ctx, r)
	if err != nil {
		return nil, store.Info{}, err
	}
	defer cn.Close()
	if err := cn.send(map[string]string{kOp: "fetch", kOwner: itoa(int64(owner)), kIter: itoa(iter), kAttempt: itoa(epoch)}); err != nil {
		return nil, store.Info{}, err
	}
	meta, err := cn.header(a.cfg.Timeout)
	if err != nil {
		return nil, store.Info{}, err
	}
	if meta[kOp] == "error" {
		_, _ = cn.rest()
		return nil, store.Info{}, &RemoteError{Who: cn.who, Code: meta[kCode], Msg: meta[kMsg]}
	}
	if _, err := cn.rest(); err != nil { // the header's message; the raw chunk records follow
		return nil, store.Info{}, err
	}
	size, e1 := metaInt(meta, kLen)
	sum, e2 := metaUint(meta, kXXH3)
	if err := errors.Join(e1, e2); err != nil || size < 0 {
		return nil, store.Info{}, fmt.Errorf("rank %d: bad shard header: %v", r, err)
	}
	if a.cfg.Memory > 0 && size > a.cfg.Memory {
		return nil, store.Info{}, fmt.Errorf("rank %d: shard of %d bytes exceeds --memory %d", r, size, a.cfg.Memory)
	}
	// A fresh buffer's pages cost about as much to allocate as the bytes
	// to receive (shmem, 4 KiB pages: ~1 GB/s here): allocate them in
	// another goroutine, ahead of the data, on the other core.
	b, err := store.NewBufferLazy(fmt.Sprintf("ckpt-restore-%d", iter), size)
	if err != nil {
		return nil, store.Info{}, err
	}
	popDone := make(chan struct{})
	var popStop atomic.Bool
	go func() {
		defer close(popDone)
		const step = 16 << 20
		for off := int64(0); off < size && !popStop.Load(); off += step {
			b.Populate(off, step)
		}
	}()

	// The chunks land straight in the buffer the trainer will map; each
	// slice is CRC32C-checked and hashed right after it arrived.
	in := store.Info{Owner: owner, Iter: iter, Epoch: epoch, Len: size, XXH3: sum, Format: meta[kFormat]}
	rr := &rawReader{cn: cn, dst: b.Bytes()[:size], limit: max(a.Chunk(), 1<<20)}
	if l != nil {
		l.begin(b.Path(), in, r)
		rr.verified = func(off, n int64) error { l.advance(off + n); return nil }
	}
	err = rr.Read()
	popStop.Store(true)
	<-popDone // before b can be closed
	if err != nil {
		b.Close()
		return nil, store.Info{}, err
	}
	if h := rr.Sum; h != sum {
		b.Close()
		return nil, store.Info{}, fmt.Errorf("rank %d: shard digest %016x, commit record %016x", r, h, sum)
	}
	return b, in, nil
}

// restorePersistent is recovery's last resort: every rank loads the same
// iteration, the latest the persistent catalog names (or the one asked
// for), checked against the catalog's digests.
func (a *Agent) restorePersistent(cn *conn, meta map[string]string, why string, s *streamer) (*store.Version, *store.Buffer, error) {
	iter := int64(-1)
	if meta[kLatest] != "1" {
		if it, err := metaInt(meta, kIter); err == nil {
			iter = it
		}
	}
	m, err := tier.Latest(a.cfg.Persistent, iter)
	if err != nil {
		return nil, nil, cn.sendError("lost", fmt.Errorf("%s; every rank must restart from the same persistent iteration, but the persistent tier %s has none: %v", why, a.cfg.Persistent, err))
	}
	data, sh, err := tier.ReadShard(a.cfg.Persistent, m, a.cfg.Rank)
	if err != nil {
		return nil, nil, cn.sendError("corrupt", fmt.Errorf("%s; persistent iteration %d: %v", why, m.Iter, err))
	}
	b, err := store.NewBuffer(fmt.Sprintf("ckpt-persistent-%d", m.Iter), int64(len(data)))
	if err != nil {
		return nil, nil, cn.sendError("failed", err)
	}
	copy(b.Bytes(), data)
	a.log.Warn("recovering from the persistent tier", "why", why, "iter", m.Iter, "dir", a.cfg.Persistent)
	return a.handOver(cn, meta, m.Iter, m.Iter, fmt.Sprintf("persistent:%s", sh.File), nil, b, b.Bytes()[:len(data)], sh.XXH3, sh.Format, false, s)
}
