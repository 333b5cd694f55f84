package agent

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/store"
)

func msg(meta map[string]string, frames ...wire.Frame) []byte {
	var b bytes.Buffer
	w := wire.NewWriterHeader(&b, wire.Header{Producer: "fuzz", Meta: meta})
	for _, f := range frames {
		_ = w.Write(f)
	}
	_ = w.Close()
	return b.Bytes()
}

// FuzzTrainerSocket feeds arbitrary bytes to the agent's trainer socket: it
// must answer or hang up, never panic, never allocate past its bounds, and
// the committed checkpoint must survive whatever arrives.
func FuzzTrainerSocket(f *testing.F) {
	a, err := New(Config{Rank: 0, World: 1, Peers: []string{"127.0.0.1:0"}, M: 1, Memory: 1 << 20, Buffer: 64 << 10, Parts: 4, Timeout: time.Second, CommitWait: 200 * time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	defer a.cancel()
	good := bytes.Repeat([]byte{7}, 1000)
	save := msg(map[string]string{kOp: "save", kIter: "1", kFormat: FormatRaw},
		&wire.Chunk{Offset: 0, Len: 1000, TotalLen: 1000, CRC32C: wire.CRC32C(good), Data: good})
	run := func(b []byte) {
		c1, c2 := net.Pipe()
		done := make(chan struct{})
		go func() { defer close(done); a.serveTrainer(c2); c2.Close() }()
		go func() { _, _ = io.Copy(io.Discard, c1) }()
		_ = c1.SetWriteDeadline(time.Now().Add(2 * time.Second))
		_, _ = c1.Write(b)
		c1.Close()
		<-done
	}
	run(save)
	a.waitPrevious(5 * time.Second)
	if a.st.Committed() != 1 {
		f.Fatalf("seed save not committed: %d", a.st.Committed())
	}
	f.Add(save)
	f.Add(msg(map[string]string{kOp: "restore", kLatest: "1", kMode: "chunks"}))
	f.Add(msg(map[string]string{kOp: "begin", kIter: "5", kLen: "100"}))
	f.Add(msg(map[string]string{kOp: "save", kIter: "7", kFormat: FormatWire}, wire.NewDenseF32("x", []float32{1, 2}, 2)))
	f.Add([]byte("\x93garbage"))
	f.Fuzz(func(t *testing.T, b []byte) {
		run(b)
		v := a.st.Get(0, 1, store.AnyEpoch)
		if v == nil {
			// A valid newer save may have been committed; iteration 1 then
			// made room for it, which is allowed only once that one is.
			if a.st.Committed() <= 1 {
				t.Fatal("the committed iteration 1 was lost")
			}
			return
		}
		if !bytes.Equal(v.Data(), good) {
			t.Fatal("committed data changed")
		}
		a.st.Unpin(v)
	})
}

// FuzzRawHeader: the chunk-record header decoder never panics, never
// accepts a length beyond R/p or the shard, and accepts every header the
// writer produces.
func FuzzRawHeader(f *testing.F) {
	var b [rawHdrLen]byte
	putRawHeader(b[:], false, 4096, 0, 10000, 7)
	f.Add(b[:], int64(0), int64(10000), int64(8192))
	putRawHeader(b[:], true, 0, 10000, 10000, 0)
	f.Add(b[:], int64(10000), int64(10000), int64(8192))
	f.Add([]byte("TWCK\xff\xff\xff\xff"), int64(0), int64(1), int64(1))
	f.Fuzz(func(t *testing.T, in []byte, next, total, limit int64) {
		if next < 0 || total < next || limit < 1 {
			return
		}
		h, err := parseRawHeader(in, next, total, limit)
		if err != nil {
			return
		}
		if h.off != next || h.n < 0 || h.n > limit || h.off+h.n > total || (h.end && (h.n != 0 || next != total)) {
			t.Fatalf("accepted a bad header: %+v (next %d total %d limit %d)", h, next, total, limit)
		}
		var out [rawHdrLen]byte
		putRawHeader(out[:], h.end, h.n, h.off, h.total, h.crc)
		if string(out[:]) != string(in[:rawHdrLen]) {
			t.Fatalf("header does not round-trip")
		}
	})
}

// FuzzStreamedRestoreAnswers feeds arbitrary bytes to a client in a
// streamed shared-memory restore, after a valid first answer: it must
// return an error or the restore, and never panic or hang on a progress
// count, a move or an answer it did not expect.
func FuzzStreamedRestoreAnswers(f *testing.F) {
	const size = 64 << 10
	path := f.TempDir() + "/buf"
	if err := os.WriteFile(path, make([]byte, size), 0o600); err != nil {
		f.Fatal(err)
	}
	first := msg(map[string]string{kOp: "ok", kIter: "3", kLen: itoa(size), kPath: path, kStream: "1", kReady: "0", kSource: "peer:1"})
	progress := func(op string, n int64) []byte { return msg(map[string]string{kOp: op, kReady: itoa(n)}) }
	release := msg(map[string]string{kOp: "ok"})
	f.Add(slices.Concat(progress("progress", 4096), progress("done", size), release))
	f.Add(slices.Concat(progress("done", size), release))
	f.Add(slices.Concat(msg(map[string]string{kOp: "moved", kLen: "10", kPath: path, kStream: "1", kReady: "0"}), progress("done", 10), release))
	f.Add(progress("progress", size+1))
	f.Add(msg(map[string]string{kOp: "error", kCode: "corrupt", kMsg: "digest"}))
	f.Fuzz(func(t *testing.T, in []byte) {
		c1, c2 := net.Pipe()
		go func() {
			go func() { _, _ = io.Copy(io.Discard, c1) }()
			_, _ = c1.Write(first)
			_, _ = c1.Write(in)
			c1.Close()
		}()
		cl := &Client{cn: newConn(c2, wire.DefaultLimits, time.Second, "agent")}
		defer cl.Close()
		_, _ = cl.RestoreShm(3, func(mem []byte, ready func(int64) error) error {
			for off := 0; off < len(mem); off += 4096 {
				if err := ready(int64(off + 4096)); err != nil {
					return err
				}
				_ = mem[off]
			}
			return nil
		})
	})
}
