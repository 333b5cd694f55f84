package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/safetensors"
	"trainwire.dev/tools/ckpt/internal/store"
)

// waitPrevious makes a new save wait until the previous one is committed
// or will never be (its replication failed, or it was abandoned by a
// recovery), for at most d.
func (a *Agent) waitPrevious(d time.Duration) error {
	a.mu.Lock()
	o := a.own
	a.mu.Unlock()
	if o == nil {
		return nil
	}
	deadline := time.Now().Add(d)
	select {
	case <-o.settled:
	case <-time.After(d):
		return fmt.Errorf("the previous checkpoint (iteration %d) is still replicating after %v", o.iter, d)
	}
	for a.st.Committed() < o.iter {
		if a.ownErr(o) != nil {
			return nil // it will never commit, so it may be overwritten
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the previous checkpoint (iteration %d) is not globally committed after %v: ranks %v have not reported their shard complete (slow, or dead?)", o.iter, d, a.missingDone(o.iter))
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// ownErr returns o's failure or abandonment (nil while it may commit).
func (a *Agent) ownErr(o *attempt) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return o.err
}

func (a *Agent) commitWait(meta map[string]string) time.Duration {
	if s, ok := meta[kWait]; ok {
		if d, err := time.ParseDuration(s); err == nil {
			return d
		}
	}
	return a.cfg.CommitWait
}

// trainerBegin reserves the in-progress buffer of this rank's slot and
// hands its shared-memory path to the trainer.
func (a *Agent) trainerBegin(cn *conn, meta map[string]string) (*store.Version, error) {
	if _, err := cn.rest(); err != nil {
		return nil, err
	}
	iter, e1 := metaInt(meta, kIter)
	size, e2 := metaInt(meta, kLen)
	if err := errors.Join(e1, e2); err != nil || size < 0 {
		return nil, cn.sendError("bad_input", fmt.Errorf("begin: %v", err))
	}
	format := meta[kFormat]
	if format == "" {
		format = FormatRaw
	}
	t0 := time.Now()
	if err := a.waitPrevious(a.commitWait(meta)); err != nil {
		return nil, cn.sendError("busy", err)
	}
	a.tl.event("begin", a.cfg.Rank, "iter", iter, "t0", t0, "t1", time.Now())
	v, err := a.st.Begin(a.cfg.Rank, iter, a.currentEpoch(), size, format, a.cfg.Timeout)
	if err != nil {
		return nil, cn.sendError("refused", err)
	}
	if err := cn.send(map[string]string{kOp: "ok", kIter: itoa(iter), kLen: itoa(size), kPath: v.Path()}); err != nil {
		a.st.Abort(v)
		return nil, err
	}
	return v, nil
}

// trainerSave takes a whole shard in the message: dense (or any data)
// frames, chunk frames of a safetensors file or raw bytes, or the path of
// a file in shared memory to read.
func (a *Agent) trainerSave(cn *conn, meta map[string]string) error {
	iter, err := metaInt(meta, kIter)
	if err != nil {
		_, _ = cn.rest()
		return cn.sendError("bad_input", fmt.Errorf("save: %v", err))
	}
	format := meta[kFormat]
	wait := a.commitWait(meta)
	var v *store.Version
	switch {
	case meta[kPath] != "":
		if _, err := cn.rest(); err != nil {
			return err
		}
		v, err = a.saveFile(meta[kPath], iter, format, wait)
	case format == FormatWire || format == "":
		v, err = a.saveFrames(cn, iter, wait)
	case format == FormatRaw || format == FormatSafetensors:
		v, err = a.saveChunks(cn, iter, format, wait)
	default:
		_, _ = cn.rest()
		err = badInput(fmt.Errorf("save: unknown format %q (want wire, safetensors or raw)", format))
	}
	if err != nil {
		code := "refused"
		var bi *badInputError
		if errors.As(err, &bi) {
			code = "bad_input"
		}
		a.log.Warn("save refused; nothing committed was touched", "iter", iter, "err", err)
		if strings.Contains(err.Error(), "exceeds the limit") {
			err = fmt.Errorf("%w (this agent takes frames of at most max(R/p, --memory) = %d bytes; --memory is %d)", err, a.lim.MaxPayload, a.cfg.Memory)
		}
		if serr := cn.sendError(code, err); serr != nil {
			return serr
		}
		if code == "bad_input" {
			return errBadStream
		}
		return nil
	}
	epoch, size := v.Epoch, v.Len
	if err := a.st.Seal(v, 0); err != nil {
		return cn.sendError("refused", err)
	}
	// Replicate even if the trainer is gone: the shard is sealed.
	a.startOwn(nil, iter, epoch)
	return cn.send(map[string]string{kOp: "ok", kIter: itoa(iter), kLen: itoa(size), kXXH3: hex(v.XXH3)})
}

// errBadStream closes a trainer connection whose stream cannot be read on.
var errBadStream = errors.New("bad stream")

type badInputError struct{ err error }

func (e *badInputError) Error() string { return e.err.Error() }

func (e *badInputError) Unwrap() error { return e.err }

func badInput(err error) error { return &badInputError{err} }

// saveFrames re-encodes the message's data frames into a shard (a
// trainwire stream), bounded by the memory limit.
func (a *Agent) saveFrames(cn *conn, iter int64, wait time.Duration) (*store.Version, error) {
	var buf bytes.Buffer
	lw := &limitWriter{w: &buf, n: a.cfg.Memory}
	w := wire.NewWriterHeader(lw, wire.Header{Producer: "ckpt", Meta: map[string]string{kRank: itoa(int64(a.cfg.Rank)), kIter: itoa(iter)}})
	for {
		f, err := cn.next()
		if err != nil {
			return nil, badInput(err)
		}
		if _, ok := f.(*wire.End); ok {
			break
		}
		if err := w.Write(f); err != nil {
			// Drain the rest so the refusal reaches the trainer in order.
			if errors.Is(err, store.ErrTooBig) {
				if _, derr := drain(cn); derr != nil {
					return nil, derr
				}
			}
			return nil, err
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if err := a.waitPrevious(wait); err != nil {
		return nil, err
	}
	v, err := a.st.Begin(a.cfg.Rank, iter, a.currentEpoch(), int64(buf.Len()), FormatWire, a.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	copy(v.Data(), buf.Bytes())
	return v, nil
}

func drain(cn *conn) (int, error) {
	n := 0
	for {
		f, err := cn.next()
		if err != nil {
			return n, err
		}
		if _, ok := f.(*wire.End); ok {
			return n, nil
		}
		n++
	}
}

// limitWriter refuses to grow past n bytes (0: no limit).
type limitWriter struct {
	w io.Writer
	n int64
	c int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if l.n > 0 && l.c+int64(len(p)) > l.n {
		return 0, fmt.Errorf("shard larger than --memory (%d bytes): %w; nothing held was dropped", l.n, store.ErrTooBig)
	}
	l.c += int64(len(p))
	return l.w.Write(p)
}

// saveChunks writes the message's chunk frames (contiguous, CRC-checked)
// straight into the in-progress buffer.
func (a *Agent) saveChunks(cn *conn, iter int64, format string, wait time.Duration) (*store.Version, error) {
	f, err := cn.next()
	if err != nil {
		return nil, badInput(err)
	}
	if _, ok := f.(*wire.End); ok {
		f = &wire.Chunk{Iter: iter, ReplicaOf: int64(a.cfg.Rank)}
	}
	first, ok := f.(*wire.Chunk)
	if !ok {
		_, _ = drain(cn)
		return nil, badInput(fmt.Errorf("save in format %s: want chunk frames, got %s", format, f.Type()))
	}
	total := first.TotalLen
	if a.cfg.Memory > 0 && total > a.cfg.Memory {
		if _, err := drain(cn); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("a shard of %d bytes is larger than --memory (%d bytes): %w; nothing held was dropped", total, a.cfg.Memory, store.ErrTooBig)
	}
	if err := a.waitPrevious(wait); err != nil {
		_, _ = drain(cn)
		return nil, err
	}
	v, err := a.st.Begin(a.cfg.Rank, iter, a.currentEpoch(), total, format, a.cfg.Timeout)
	if err != nil {
		_, _ = drain(cn)
		return nil, err
	}
	data := v.Data()
	var next int64
	ch := first
	for {
		if ch.Offset != next || ch.TotalLen != total {
			a.st.Abort(v)
			_, _ = drain(cn)
			return nil, badInput(fmt.Errorf("chunk at offset %d (total %d), expected offset %d (total %d)", ch.Offset, ch.TotalLen, next, total))
		}
		copy(data[next:], ch.Data)
		next += ch.Len
		if first.Len == 0 && first.TotalLen == 0 && first.Data == nil {
			break // empty shard, end already read
		}
		f, err := cn.next()
		if err != nil {
			a.st.Abort(v)
			return nil, badInput(err)
		}
		if _, ok := f.(*wire.End); ok {
			break
		}
		if ch, ok = f.(*wire.Chunk); !ok {
			a.st.Abort(v)
			_, _ = drain(cn)
			return nil, badInput(fmt.Errorf("save: %s frame among chunks", f.Type()))
		}
	}
	if next != total {
		a.st.Abort(v)
		return nil, badInput(fmt.Errorf("save: %d of %d bytes arrived", next, total))
	}
	if format == FormatSafetensors {
		if _, err := safetensors.Parse(data[:total]); err != nil {
			a.st.Abort(v)
			return nil, badInput(err)
		}
	}
	return v, nil
}

// saveFile reads a file the trainer wrote in shared memory (e.g.
// /dev/shm/...) into the in-progress buffer.
func (a *Agent) saveFile(path string, iter int64, format string, wait time.Duration) (*store.Version, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, badInput(fmt.Errorf("save: %w", err))
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if a.cfg.Memory > 0 && size > a.cfg.Memory {
		return nil, fmt.Errorf("%s: a shard of %d bytes is larger than --memory (%d bytes): %w; nothing held was dropped", path, size, a.cfg.Memory, store.ErrTooBig)
	}
	if format == "" {
		format = FormatRaw
	}
	if err := a.waitPrevious(wait); err != nil {
		return nil, err
	}
	v, err := a.st.Begin(a.cfg.Rank, iter, a.currentEpoch(), size, format, a.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	if _, err := io.ReadFull(f, v.Data()); err != nil {
		a.st.Abort(v)
		return nil, fmt.Errorf("save: reading %s: %w", path, err)
	}
	if err := validateShard(format, v.Data()); err != nil {
		a.st.Abort(v)
		return nil, badInput(fmt.Errorf("%s: %w", path, err))
	}
	return v, nil
}

func validateShard(format string, b []byte) error {
	switch format {
	case FormatSafetensors:
		_, err := safetensors.Parse(b)
		return err
	case FormatWire:
		r := wire.NewReader(bytes.NewReader(b), wire.Limits{MaxPayload: int64(len(b)) + 1})
		for {
			if _, err := r.NextFrame(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}
	return nil
}
