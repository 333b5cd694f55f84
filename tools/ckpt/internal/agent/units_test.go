package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"net"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/tools/ckpt/internal/store"
)

// newTestAgent is an agent of world n (m = 2) that is never served: its
// pieces are driven directly.
func newTestAgent(t *testing.T, rank, n int) *Agent {
	t.Helper()
	peers := make([]string, n)
	for i := range peers {
		peers[i] = "127.0.0.1:0"
	}
	a, err := New(Config{Rank: rank, World: n, Peers: peers, M: 2, Buffer: 1 << 20, Parts: 4, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.st.Close)
	return a
}

// Every field of a raw chunk header is bounded before it is believed.
func TestRawHeaderBounds(t *testing.T) {
	hdr := func(end bool, n, off, total int64) []byte {
		b := make([]byte, rawHdrLen)
		putRawHeader(b, end, n, off, total, 0)
		return b
	}
	const limit, total = 1 << 10, 5000
	for _, tc := range []struct {
		name      string
		b         []byte
		next      int64
		want      string // "" accepts
		crcFailed bool
	}{
		{"chunk", hdr(false, 1024, 1024, total), 1024, "", false},
		{"last chunk", hdr(false, 904, 4096, total), 4096, "", false},
		{"end", hdr(true, 0, total, total), total, "", false},
		{"short header", hdr(false, 1, 0, total)[:31], 0, "chunk header of 31 bytes", false},
		{"magic", append([]byte("XXXX"), hdr(false, 1, 0, total)[4:]...), 0, "bad chunk magic", false},
		{"header CRC", func() []byte { b := hdr(false, 1024, 0, total); b[5] ^= 1; return b }(), 0, "corrupt chunk header", true},
		{"other shard", hdr(false, 10, 0, total+1), 0, "inside one of 5000", false},
		{"offset", hdr(false, 10, 2048, total), 1024, "chunk at offset 2048, expected 1024", false},
		{"end with data", hdr(true, 3, total, total), total, "end record with 3 bytes", false},
		{"early end", hdr(true, 0, 1024, total), 1024, "shard ended at byte 1024 of 5000", false},
		{"empty chunk", hdr(false, 0, 0, total), 0, "empty chunk", false},
		{"over R/p", hdr(false, limit+1, 0, total), 0, "exceeds R/p", false},
		{"overrun", hdr(false, 1000, 4096, total), 4096, "overruns the shard", false},
		{"huge length", func() []byte {
			b := hdr(false, 0, 0, total)
			binary.LittleEndian.PutUint32(b[4:], 0xffffffff)
			binary.LittleEndian.PutUint32(b[28:], crc32.Checksum(b[:28], castagnoli))
			return b
		}(), 0, "exceeds R/p", false},
	} {
		_, err := parseRawHeader(tc.b, tc.next, total, limit)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		case tc.crcFailed != errors.Is(err, errRawCRC):
			t.Errorf("%s: %v: errRawCRC %v, want %v", tc.name, err, errors.Is(err, errRawCRC), tc.crcFailed)
		}
	}
}

// Message fields: a missing or malformed number names its key.
func TestMetaDecoding(t *testing.T) {
	m := map[string]string{kIter: "12", kXXH3: "ff", "bad": "1x", kAttempt: "-3"}
	if v, err := metaInt(m, kIter); v != 12 || err != nil {
		t.Fatalf("metaInt: %d %v", v, err)
	}
	if _, err := metaInt(m, kOwner); err == nil || !strings.Contains(err.Error(), `missing "owner"`) {
		t.Fatalf("missing owner: %v", err)
	}
	if _, err := metaInt(m, "bad"); err == nil || !strings.Contains(err.Error(), "not an integer") {
		t.Fatalf("bad integer: %v", err)
	}
	if v, err := metaUint(m, kXXH3); v != 255 || err != nil {
		t.Fatalf("metaUint: %d %v", v, err)
	}
	if _, err := metaUint(m, "bad"); err == nil || !strings.Contains(err.Error(), "not a hex digest") {
		t.Fatalf("bad digest: %v", err)
	}
	if metaEpoch(m, kAttempt) != -3 || metaEpoch(m, "bad") != -1 || metaEpoch(m, kOwner) != -1 {
		t.Fatal("metaEpoch")
	}
}

// C-RC-1: an iteration commits when every rank reported its shard
// complete in the agent's current epoch; a report of another epoch never
// counts, and advancing the epoch forgets the reports gathered so far.
func TestCommitRule(t *testing.T) {
	a := newTestAgent(t, 0, 3)
	a.markDone(0, 1, 0)
	a.markDone(1, 1, 0)
	a.markDone(2, 1, 1) // another epoch's attempt
	if c := a.st.Committed(); c != -1 {
		t.Fatalf("committed %d with a report of another epoch", c)
	}
	a.markDone(2, 1, 0)
	if c, e := a.st.CommittedAt(); c != 1 || e != 0 {
		t.Fatalf("committed (%d, %d), want (1, 0)", c, e)
	}
	a.markDone(0, 2, 0)
	a.markDone(1, 2, 0)
	a.advance("test")
	a.markDone(2, 2, 0)
	if c := a.st.Committed(); c != 1 {
		t.Fatalf("committed %d from reports of before the epoch advanced", c)
	}
	for r := range 3 {
		a.markDone(r, 2, 1)
	}
	if c, e := a.st.CommittedAt(); c != 2 || e != 1 {
		t.Fatalf("committed (%d, %d), want (2, 1)", c, e)
	}
}

// A new incarnation of a rank advances the epoch and takes the rank out of
// the failed set; a higher epoch is adopted; a message without an
// incarnation (ckpt persist's client) changes nothing.
func TestObserve(t *testing.T) {
	a := newTestAgent(t, 0, 4)
	a.OnDecision(DecisionHardware, []int{1})
	a.observe(1, map[string]string{kEpoch: "9"})
	a.observe(1, map[string]string{kInc: hex(5), kEpoch: "0"})
	if e := a.currentEpoch(); e != 0 {
		t.Fatalf("epoch %d after a first hello", e)
	}
	a.observe(1, map[string]string{kInc: hex(6), kEpoch: "0"})
	if e := a.currentEpoch(); e != 1 || !strings.Contains(a.why, "rank 1's agent was replaced") || len(a.failedRanks()) != 0 {
		t.Fatalf("after a new incarnation: epoch %d (%s), failed %v", e, a.why, a.failedRanks())
	}
	a.observe(2, map[string]string{kInc: hex(7), kEpoch: "5", kWhy: "rank 2 restored", kCommitted: "4", kCommittedEpoch: "3"})
	if e := a.currentEpoch(); e != 5 || a.why != "rank 2 restored" {
		t.Fatalf("epoch %d (%s), want 5 (rank 2 restored)", e, a.why)
	}
	if c, e := a.st.CommittedAt(); c != 4 || e != 3 {
		t.Fatalf("committed (%d, %d) learned, want (4, 3)", c, e)
	}
}

// The failed set follows the root's decisions in order (hardware in,
// replaced or software out; lost groups and this rank itself never in),
// and each agent's own temporary copies are placement.Extra's for it.
func TestOnDecision(t *testing.T) {
	a := newTestAgent(t, 2, 6) // groups {0,1} {2,3} {4,5}
	a.OnDecision(DecisionHardware, []int{1})
	if f, o := a.failedRanks(), a.extraOwners(a.failedRanks()); !slices.Equal(f, []int{1}) || !slices.Equal(o, []int{0}) {
		t.Fatalf("rank 1 failed: failed %v, rank 2 copies %v; want [1], [0]", f, o)
	}
	if len(a.rerep) != 1 {
		t.Fatal("a hardware decision did not wake the re-replication")
	}
	a.OnDecision(DecisionHardware, []int{2, -1, 6})
	a.OnDecision("lost_group", []int{4, 5})
	a.OnDecision(DecisionHardware, []int{3})
	if f := a.failedRanks(); !slices.Equal(f, []int{1, 3}) {
		t.Fatalf("failed %v, want [1 3]", f)
	}
	b := newTestAgent(t, 0, 6)
	if o := b.extraOwners([]int{1, 3}); !slices.Equal(o, []int{3}) {
		t.Fatalf("ranks 1 and 3 failed: rank 0 copies %v, want [3]", o)
	}
	a.OnDecision(DecisionReplaced, []int{1})
	a.OnDecision(DecisionSoftware, []int{3})
	if f := a.failedRanks(); len(f) != 0 {
		t.Fatalf("failed %v after both came back", f)
	}
}

// Recovery's choices from the inventories: dead peers do not count; the
// newest committed iteration wins, then its newest epoch; an older
// iteration is restorable only from an epoch in which every rank's shard
// is held.
func TestRecoveryChoices(t *testing.T) {
	v := func(owner int, iter, epoch int64) store.Info {
		return store.Info{Owner: owner, Iter: iter, Epoch: epoch}
	}
	invs := []peerInventory{
		{rank: 0, committed: 3, committedEpoch: 1, versions: []store.Info{v(0, 3, 1), v(1, 3, 1), v(0, 2, 0), v(1, 2, 2)}},
		{rank: 1, committed: 3, committedEpoch: 2, versions: []store.Info{v(1, 3, 2), v(0, 2, 2), v(0, 2, 3)}},
		{rank: 2, committed: 9, committedEpoch: 9, versions: []store.Info{v(0, 9, 9), v(1, 9, 9)}, err: errors.New("dead")},
	}
	if it, e := newestCommitted(invs); it != 3 || e != 2 {
		t.Fatalf("newest committed (%d, %d), want (3, 2)", it, e)
	}
	if w := holdersOf(invs, 3, 1, 2); !slices.Equal(w[0], []int{0}) || !slices.Equal(w[1], []int{0}) {
		t.Fatalf("holders of iteration 3 epoch 1: %v", w)
	}
	if w := holdersOf(invs, 9, 9, 2); len(w[0])+len(w[1]) != 0 {
		t.Fatalf("a dead peer counted as a holder: %v", w)
	}
	if e := fullEpoch(invs, 2, 2); e != 2 {
		t.Fatalf("full epoch of iteration 2: %d, want 2 (epochs 0 and 3 lack rank 1's shard)", e)
	}
	if e := fullEpoch(invs, 1, 2); e != -1 {
		t.Fatalf("full epoch of an iteration nobody holds: %d", e)
	}
}

// A temporary copy (a shard this rank does not hold under the placement)
// is dropped once a newer iteration commits; the placement's own are not.
func TestDropExtras(t *testing.T) {
	a := newTestAgent(t, 2, 4) // groups {0,1} {2,3}: rank 2 holds 2 and 3
	for _, owner := range []int{0, 2, 3} {
		ver, err := a.st.Begin(owner, 1, 0, 4096, FormatRaw, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.st.Seal(ver, 0); err != nil {
			t.Fatal(err)
		}
	}
	for r := range 4 {
		a.markDone(r, 1, 0)
	}
	if g := a.st.Get(0, 1, store.AnyEpoch); g == nil {
		t.Fatal("the temporary copy went with the commit of its own iteration")
	} else {
		a.st.Unpin(g)
	}
	for r := range 4 {
		a.markDone(r, 2, 0)
	}
	var owners []int
	for _, in := range a.st.Inventory() {
		owners = append(owners, in.Owner)
	}
	if !slices.Equal(owners, []int{2, 3}) {
		t.Fatalf("after iteration 2 committed: versions of owners %v, want [2 3]", owners)
	}
}

// TestListenPeersWaitsForThePort: a replacement agent whose peer port is
// still held (its killed predecessor not yet torn down) binds once the
// port is free, within Timeout; a port held past Timeout is an error.
func TestListenPeersWaitsForThePort(t *testing.T) {
	held, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := newTestAgent(t, 0, 2)
	a.cfg.Peers[0], a.cfg.Timeout = held.Addr().String(), 10*time.Second
	a.ctx, a.cancel = context.WithCancel(context.Background())
	defer a.cancel()
	time.AfterFunc(300*time.Millisecond, func() { held.Close() })
	l, err := a.listenPeers()
	require.NoError(t, err)
	require.Equal(t, a.cfg.Peers[0], l.Addr().String())
	l.Close()

	// A listener of its own: the timer's closure still reads held.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	a.cfg.Peers[0], a.cfg.Timeout = busy.Addr().String(), 200*time.Millisecond
	_, err = a.listenPeers()
	require.ErrorIs(t, err, syscall.EADDRINUSE)
}

// TestFlights: one fetch of a shard at a time; the others wait for it,
// then find it in the store (or, when it failed, fetch it themselves);
// the rank a fetch copied from is remembered for the restore's source.
func TestFlights(t *testing.T) {
	a := newTestAgent(t, 1, 4)
	a.ctx, a.cancel = context.WithCancel(context.Background())
	defer a.cancel()
	k := shardKey{owner: 1, iter: 3, epoch: 0}
	release, _, err := a.claimFetch(a.ctx, k, nil)
	require.NoError(t, err)
	require.NotNil(t, release)
	second := make(chan func(int), 1)
	go func() {
		r, _, err := a.claimFetch(a.ctx, k, nil)
		require.NoError(t, err)
		second <- r
	}()
	select {
	case <-second:
		t.Fatal("a second fetch of the shard started while the first was in flight")
	case <-time.After(100 * time.Millisecond):
	}
	release(-1) // the first failed: the waiter fetches it itself
	r2 := <-second
	require.NotNil(t, r2)
	r2(2)
	require.Equal(t, 2, a.flights.source(k))
	require.Equal(t, -1, a.flights.source(shardKey{owner: 0, iter: 3}))
	// A waiter gives up with its context.
	release, _, err = a.claimFetch(a.ctx, k, nil)
	require.NoError(t, err)
	defer release(-1)
	ctx, cancel := context.WithTimeout(a.ctx, 50*time.Millisecond)
	defer cancel()
	r3, _, err := a.claimFetch(ctx, k, nil)
	require.Nil(t, r3)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}
