package agent

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"trainwire.dev/lib/wire"
)

// The replication plan follows Algorithm 6.2 when the spans are known,
// R/p chunks otherwise; spans profiled online from ticks (C-RP-3).
func TestPlanAndOnlineProfile(t *testing.T) {
	a, err := New(Config{Rank: 0, World: 2, Peers: []string{"127.0.0.1:0", "127.0.0.1:0"}, M: 2, Buffer: 4 << 20, Parts: 4,
		Interleave: &Interleave{ProfileIters: 3, Bandwidth: 25e6, Alpha: 0.001, Mu: 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	// No spans yet: fixed chunks of R/p.
	p := a.plan(10<<20, 0)
	if len(p) != 10 || p[0].at != -1 || p[9].off != 9<<20 {
		t.Fatalf("plan without spans: %+v", p)
	}
	// Three iterations of ticks, each reporting a comm span 0.2–0.3 s.
	for i := 0; i < 4; i++ {
		a.tick.init()
		a.tick.mu.Lock()
		prevSet := !a.tick.last.IsZero()
		a.tick.mu.Unlock()
		if prevSet {
			// Pretend the previous iteration lasted 0.5 s.
			a.tick.mu.Lock()
			a.tick.last = time.Now().Add(-500 * time.Millisecond)
			a.tick.mu.Unlock()
		}
		ev := &wire.Event{Name: "allreduce", Cat: "comm", Ph: "X", Rank: -1, Stream: -1, Corr: -1, TS: 200e6, Dur: 100e6}
		a.recordTick([]wire.Frame{ev})
	}
	starts, lens := a.spans()
	if len(lens) != 2 || starts[0] > 1e-9 || lens[0] < 0.19 || lens[0] > 0.21 || starts[1] < 0.29 || starts[1] > 0.31 {
		t.Fatalf("profiled spans starts %v lens %v, want [0, 0.3] and [0.2, ~0.2]", starts, lens)
	}
	p = a.plan(10<<20, 0)
	var next int64
	spanOf := map[bool]int64{}
	for i, c := range p {
		if c.off != next || c.size <= 0 || c.size > 1<<20 {
			t.Fatalf("piece %+v: want offset %d, 0 < size ≤ R/p", c, next)
		}
		if i > 0 && c.at < p[i-1].at {
			t.Fatalf("piece %d starts at %v, before piece %d (%v)", i, c.at, i-1, p[i-1].at)
		}
		next += c.size
		spanOf[c.at >= 290*time.Millisecond] += c.size
	}
	if next != 10<<20 || len(spanOf) != 2 {
		t.Fatalf("plan covers %d bytes in %d spans: %v", next, len(spanOf), spanOf)
	}
	// μ·0.2 s at 25 MB/s ≈ 4.5 MB in the first span, the rest in the last.
	if first := spanOf[false]; first < 3<<20 || first > 5<<20 {
		t.Fatalf("%d bytes in the first span, want ≈ 4.3 MiB", first)
	}
}

// Live training traffic (C-RP-5): while the trainer reports a comm op under
// way, the gate holds checkpoint bytes back; a chunk planned for idle span
// k waits until the k-th comm op of the iteration has ended.
func TestLiveCommGate(t *testing.T) {
	var tk ticker
	tk.comm(true, time.Now()) // live from now on; a comm op runs
	ctx := t.Context()
	released := make(chan error, 1)
	go func() { released <- tk.gate(ctx, time.Minute) }()
	select {
	case err := <-released:
		t.Fatalf("the gate let bytes through during a comm op (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	tk.comm(false, time.Now())
	select {
	case err := <-released:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the gate stayed shut after the comm op ended")
	}

	// A new iteration (tick 1): span 0 is open at once, span 1 only after
	// the first comm op ends.
	tk.mu.Lock()
	tk.seq, tk.ends, tk.idleSince = 1, 0, time.Now()
	tk.notifyLocked()
	tk.mu.Unlock()
	if err := tk.waitSpan(ctx, 1, 0, time.Time{}, time.Minute); err != nil {
		t.Fatal(err)
	}
	span1 := make(chan error, 1)
	go func() { span1 <- tk.waitSpan(ctx, 1, 1, time.Time{}, time.Minute) }()
	tk.comm(true, time.Now())
	select {
	case err := <-span1:
		t.Fatalf("span 1 opened before the comm op ended (err %v)", err)
	case <-time.After(50 * time.Millisecond):
	}
	tk.comm(false, time.Now())
	select {
	case err := <-span1:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("span 1 never opened")
	}
	// A trainer that stops ticking: the wait gives up (errGaveUp) instead
	// of holding the replication for ever.
	if err := tk.waitSpan(ctx, 5, 0, time.Time{}, 20*time.Millisecond); err != errGaveUp {
		t.Fatalf("waiting for a tick that never comes: %v, want errGaveUp", err)
	}
}

// The raw chunk path: what the writer sends, the reader accepts into its
// destination with the right digest; a flipped data byte or header byte is
// caught (errRawCRC), and nothing beyond the destination is written.
func TestRawChunks(t *testing.T) {
	data := make([]byte, 3<<20+12345)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	want, _ := hashGrid(data, 1<<20)
	for _, flip := range []int{-1, 100, rawHdrLen + 5000, 2*(rawHdrLen+1<<20) + 7} {
		cl, sv := net.Pipe()
		var wbuf bytes.Buffer
		go func() {
			defer cl.Close()
			rw := &rawWriter{cn: &conn{c: cl, bw: bufio.NewWriter(cl), timeout: time.Minute}}
			// Write into a buffer first, flip one byte, then send.
			rw.cn.c = &recordConn{Conn: cl, w: &wbuf}
			for off := int64(0); off < int64(len(data)); off += 1 << 20 {
				n := min(1<<20, int64(len(data))-off)
				if err := rw.chunk(off, int64(len(data)), data[off:off+n], -1, nil, 0); err != nil {
					t.Error(err)
					return
				}
			}
			if err := rw.end(int64(len(data)), int64(len(data))); err != nil {
				t.Error(err)
				return
			}
			b := wbuf.Bytes()
			if flip >= 0 {
				b[flip] ^= 0x10
			}
			_, _ = cl.Write(b)
		}()
		dst := make([]byte, len(data)+16)
		rr := &rawReader{cn: &conn{c: sv, br: bufio.NewReaderSize(sv, 1<<16), timeout: time.Minute, who: "rank 9"}, dst: dst[:len(data)], limit: 1 << 20}
		err := rr.Read()
		sv.Close()
		switch {
		case flip < 0 && err != nil:
			t.Fatalf("clean stream: %v", err)
		case flip < 0 && (rr.Sum != want || !bytes.Equal(dst[:len(data)], data)):
			t.Fatal("clean stream: wrong bytes or digest")
		case flip >= 0 && !errors.Is(err, errRawCRC):
			t.Fatalf("byte %d flipped: %v, want a CRC32C mismatch", flip, err)
		}
		for _, b := range dst[len(data):] {
			if b != 0 {
				t.Fatal("the reader wrote past its destination")
			}
		}
	}
}

// recordConn captures writes instead of sending them.
type recordConn struct {
	net.Conn
	w *bytes.Buffer
}

func (c *recordConn) Write(b []byte) (int, error) { return c.w.Write(b) }
