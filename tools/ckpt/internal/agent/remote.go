package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zeebo/xxh3"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/crc32c"
	"trainwire.dev/tools/ckpt/internal/store"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// Remote reads committed shards from running agents over their peer
// protocol (the same authenticated TCP connections agents use between
// themselves); `ckpt persist` uses it. It holds no replicas.
type Remote struct {
	a *Agent
	// epochs[iter] is the attempt Latest found committed for iter.
	epochs map[int64]int64
}

// NewRemote returns a client of the agents at peers (rank order).
func NewRemote(peers []string, token []byte, run string, m int, timeout time.Duration) (*Remote, error) {
	if m < 1 || m > len(peers) {
		m = 1
	}
	a, err := New(Config{Rank: 0, World: len(peers), Peers: peers, M: m, Token: token, Run: run, Timeout: timeout, Memory: 1})
	if err != nil {
		return nil, err
	}
	a.lim = wire.Limits{MaxPayload: wire.DefaultLimits.MaxPayload}
	a.passive = true
	return &Remote{a: a, epochs: map[int64]int64{}}, nil
}

// World is the number of ranks.
func (r *Remote) World() int { return r.a.cfg.World }

// Latest asks every agent for its inventory and returns the latest
// committed iteration every rank's shard of which is complete on a live
// holder, and for each rank the live holders of its shard (group members
// first). It fails, naming the ranks, if there is none.
func (r *Remote) Latest(ctx context.Context) (int64, [][]int, error) {
	a := r.a
	invs := make([]peerInventory, a.cfg.World)
	var wg sync.WaitGroup
	for i := range invs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			invs[i] = a.askInventory(ctx, i, map[string]string{kOp: "inventory"})
		}(i)
	}
	wg.Wait()
	var dead []string
	committed, epoch := int64(-1), int64(-1)
	for _, in := range invs {
		if in.err != nil {
			dead = append(dead, fmt.Sprintf("rank %d (%v)", in.rank, in.err))
			continue
		}
		if in.committed > committed || (in.committed == committed && in.committedEpoch > epoch) {
			committed, epoch = in.committed, in.committedEpoch
		}
	}
	if committed < 0 {
		return -1, nil, fmt.Errorf("no committed checkpoint in the memory of any live agent (unreachable: %s)", list(dead))
	}
	r.epochs[committed] = epoch
	where := holdersOf(invs, committed, epoch, a.cfg.World)
	var lost []string
	for o, w := range where {
		if len(w) == 0 {
			lost = append(lost, fmt.Sprintf("rank %d", o))
		}
		sort.SliceStable(w, func(i, j int) bool { return w[i] == o && w[j] != o })
	}
	if len(lost) > 0 {
		return committed, nil, fmt.Errorf("iteration %d: no live agent holds the shard of %s (unreachable: %s)", committed, strings.Join(lost, ", "), list(dead))
	}
	return committed, where, nil
}

// askInventory sends req (an inventory request) to rank i and returns its
// committed iteration and complete versions.
func (a *Agent) askInventory(ctx context.Context, i int, req map[string]string) peerInventory {
	out := peerInventory{rank: i}
	out.err = func() error {
		cn, err := a.dial(ctx, i)
		if err != nil {
			return err
		}
		defer cn.Close()
		if err := cn.send(req); err != nil {
			return err
		}
		meta, frames, err := cn.recv(a.cfg.Timeout)
		if err != nil {
			return err
		}
		c, err := metaInt(meta, kCommitted)
		if err != nil {
			return fmt.Errorf("rank %d: inventory: %v", i, err)
		}
		out.committed = c
		out.committedEpoch = metaEpoch(meta, kCommittedEpoch)
		for _, f := range frames {
			s, ok := f.(*wire.Stats)
			if !ok || s.Name != "version" {
				continue
			}
			x, _ := metaUint(s.Labels, "xxh3")
			out.versions = append(out.versions, store.Info{Owner: int(s.Rank), Iter: s.Step, Epoch: metaEpoch(s.Labels, kAttempt), Len: int64(s.Values["len"]), XXH3: x, Format: s.Labels["format"], State: store.Complete.String()})
		}
		return nil
	}()
	return out
}

// Fetch streams owner's shard of iter from holder h into w, checking every
// chunk's CRC32C (the reader does), the order, the length and the shard's
// XXH3 against the holder's commit record. progress, if set, is called
// with the bytes written so far.
func (r *Remote) Fetch(ctx context.Context, h, owner int, iter int64, w io.Writer, progress func(int64)) (tier.Fetched, error) {
	a := r.a
	cn, err := a.dial(ctx, h)
	if err != nil {
		return tier.Fetched{}, err
	}
	defer cn.Close()
	stop := context.AfterFunc(ctx, func() { cn.Close() })
	defer stop()
	req := map[string]string{kOp: "fetch", kOwner: itoa(int64(owner)), kIter: itoa(iter)}
	if e, ok := r.epochs[iter]; ok {
		req[kAttempt] = itoa(e)
	}
	if err := cn.send(req); err != nil {
		return tier.Fetched{}, err
	}
	meta, err := cn.header(a.cfg.Timeout)
	if err != nil {
		return tier.Fetched{}, err
	}
	if meta[kOp] == "error" {
		_, _ = cn.rest()
		return tier.Fetched{}, &RemoteError{Who: cn.who, Code: meta[kCode], Msg: meta[kMsg]}
	}
	if _, err := cn.rest(); err != nil { // the header's message; the raw chunk records follow
		return tier.Fetched{}, err
	}
	size, e1 := metaInt(meta, kLen)
	sum, e2 := metaUint(meta, kXXH3)
	if err := errors.Join(e1, e2); err != nil || size < 0 {
		return tier.Fetched{}, fmt.Errorf("rank %d: bad shard header: %v", h, err)
	}
	hx := xxh3.New()
	crc := uint32(0)
	var next int64
	var hb [rawHdrLen]byte
	var buf []byte
	limit := wire.DefaultLimits.MaxPayload
	for {
		_ = cn.c.SetReadDeadline(time.Now().Add(a.cfg.Timeout))
		if _, err := io.ReadFull(cn.br, hb[:]); err != nil {
			return tier.Fetched{}, cn.wrap("receive", err)
		}
		rh, err := parseRawHeader(hb[:], next, size, limit)
		if err != nil {
			return tier.Fetched{}, fmt.Errorf("%s: %w", cn.who, err)
		}
		if rh.end {
			if got := hx.Sum64(); got != sum {
				return tier.Fetched{}, fmt.Errorf("%s: rank %d's shard of iteration %d: digest %016x, commit record %016x", cn.who, owner, iter, got, sum)
			}
			return tier.Fetched{Len: size, XXH3: sum, CRC32C: crc, Format: meta[kFormat]}, nil
		}
		if int64(cap(buf)) < rh.n {
			buf = make([]byte, rh.n)
		}
		b := buf[:rh.n]
		if _, err := io.ReadFull(cn.br, b); err != nil {
			return tier.Fetched{}, cn.wrap("receive", err)
		}
		if c := crc32.Checksum(b, castagnoli); c != rh.crc {
			return tier.Fetched{}, fmt.Errorf("%s: corrupt chunk at shard offset %d: %w (chunk says %08x, data has %08x)", cn.who, next, errRawCRC, rh.crc, c)
		}
		if _, err := w.Write(b); err != nil {
			return tier.Fetched{}, err
		}
		_, _ = hx.Write(b)
		crc = crc32c.Combine(crc, rh.crc, rh.n) // the shard's CRC without a second pass
		next += rh.n
		if progress != nil {
			progress(next)
		}
	}
}
