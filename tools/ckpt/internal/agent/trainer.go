package agent

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/store"
)

// serveTrainer serves the local trainer's requests on one connection.
func (a *Agent) serveTrainer(c net.Conn) {
	cn := newConn(c, a.lim, a.cfg.Timeout, "trainer")
	var pending *store.Version // begun by "begin", finished by "commit"
	var held []*store.Version  // pinned for a shm restore until "release"
	var tmp []*store.Buffer
	defer func() {
		if pending != nil {
			a.st.Abort(pending)
		}
		for _, v := range held {
			a.st.Unpin(v)
		}
		for _, b := range tmp {
			b.Close()
		}
	}()
	for {
		meta, err := cn.header(0)
		if err != nil {
			if !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "connection closed") {
				a.log.Warn("trainer sent garbage; connection closed, nothing committed was touched", "err", err)
				_ = cn.sendError("bad_input", err)
			}
			return
		}
		op := meta[kOp]
		var rerr error
		switch op {
		case "save":
			rerr = a.trainerSave(cn, meta)
		case "begin":
			if pending != nil {
				rerr = cn.sendError("bad_input", fmt.Errorf("begin of iteration %d while iteration %d is begun and not committed", mustInt(meta, kIter), pending.Iter))
				break
			}
			pending, rerr = a.trainerBegin(cn, meta)
			if pending != nil {
				a.registerWriter(peerProcess(c))
			}
		case "commit":
			if _, err := cn.rest(); err != nil {
				return
			}
			iter, err := metaInt(meta, kIter)
			if pending == nil || err != nil || iter != pending.Iter {
				rerr = cn.sendError("bad_input", fmt.Errorf("commit of iteration %s without a matching begin", meta[kIter]))
				break
			}
			v := pending
			pending = nil
			if err := cn.send(map[string]string{kOp: "ok", kIter: itoa(v.Iter), kLen: itoa(v.Len)}); err != nil {
				a.st.Abort(v)
				return
			}
			// The trainer may go on: the local replica is sealed (digest,
			// then commit record) and replicated in the background.
			a.startOwn(v, v.Iter, v.Epoch)
		case "restore":
			var hv *store.Version
			var tb *store.Buffer
			hv, tb, rerr = a.trainerRestore(cn, meta)
			if hv != nil {
				held = append(held, hv)
			}
			if tb != nil {
				tmp = append(tmp, tb)
			}
		case "release":
			if _, err := cn.rest(); err != nil {
				return
			}
			for _, v := range held {
				a.st.Unpin(v)
			}
			for _, b := range tmp {
				b.Close()
			}
			held, tmp = nil, nil
			rerr = cn.send(map[string]string{kOp: "ok"})
		case "status":
			if _, err := cn.rest(); err != nil {
				return
			}
			rerr = a.trainerStatus(cn)
		case "tick":
			rerr = a.trainerTick(cn, meta)
		case "comm":
			rerr = a.trainerComm(cn, meta)
		case "wait":
			// Wait until an iteration is committed (or fails).
			if _, err := cn.rest(); err != nil {
				return
			}
			rerr = a.trainerWait(cn, meta)
		default:
			_, _ = cn.rest()
			rerr = cn.sendError("bad_input", fmt.Errorf("unknown operation %q (want save, begin, commit, restore, release, status, wait, tick, comm)", op))
		}
		if rerr == errBadStream {
			return
		}
		if rerr != nil {
			a.log.Warn("trainer request failed", "op", op, "err", rerr)
			return
		}
	}
}

func mustInt(m map[string]string, k string) int64 { v, _ := metaInt(m, k); return v }

// trainerStatus reports the committed iteration, what is held, counters.
func (a *Agent) trainerStatus(cn *conn) error {
	used, limit := a.st.Used()
	meta := map[string]string{kOp: "status", kRank: itoa(int64(a.cfg.Rank)), "world": itoa(int64(a.cfg.World)), kCommitted: itoa(a.st.Committed()), kEpoch: itoa(a.currentEpoch()),
		"m": itoa(int64(a.cfg.M)), "strategy": a.place.Strategy, "sends_to": fmt.Sprint(a.sends()), "used": itoa(used), "memory": itoa(limit), "chunk": itoa(a.Chunk())}
	var frames []wire.Frame
	for _, in := range a.st.Inventory() {
		frames = append(frames, &wire.Stats{Tool: "ckpt", Name: "version", Step: in.Iter, Rank: int64(in.Owner),
			Values: map[string]float64{"len": float64(in.Len)}, Labels: map[string]string{"state": in.State, "format": in.Format, "xxh3": hex(in.XXH3), kAttempt: itoa(in.Epoch)}})
	}
	frames = append(frames, &wire.Stats{Tool: "ckpt", Name: "counters", Rank: int64(a.cfg.Rank), Values: map[string]float64{
		"bytes_sent": float64(atomic.LoadInt64(&a.stats.BytesSent)), "bytes_received": float64(atomic.LoadInt64(&a.stats.BytesReceived)),
		"chunks_sent": float64(atomic.LoadInt64(&a.stats.ChunksSent)), "chunks_received": float64(atomic.LoadInt64(&a.stats.ChunksRecv)),
		"crc_failures": float64(atomic.LoadInt64(&a.stats.CRCFailures)), "replications_failed": float64(atomic.LoadInt64(&a.stats.ReplicationsFailed)),
		"replications_ok": float64(atomic.LoadInt64(&a.stats.ReplicationsOK)), "restores_checked_at_rest": float64(atomic.LoadInt64(&a.stats.CheckedAtRest)),
	}})
	return cn.send(meta, frames...)
}
