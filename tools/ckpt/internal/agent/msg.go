package agent

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/wire"
)

// A message on every agent connection (trainer ↔ agent on the Unix socket,
// agent ↔ agent over TCP) is one trainwire stream (docs/wire.md): a header
// whose meta carries the operation ("op") and its arguments, data frames
// (chunk, dense, …, stats), and the end frame with the count and the XXH3
// of every payload. A connection carries several messages in each
// direction, one after the other.

// Meta keys.
const (
	kOp        = "op"
	kIter      = "iter"
	kOwner     = "owner"
	kLen       = "len"
	kXXH3      = "xxh3"
	kFormat    = "format"
	kCommitted = "committed"
	kPath      = "path"
	kSource    = "source"
	kStatus    = "status"
	kMsg       = "msg"
	kCode      = "code"
	kJob       = "job"
	kLatest    = "latest"
	kMode      = "mode"
	kRank      = "rank"
	kWait      = "wait"
	kStream    = "stream" // a shm restore answered as the shard lands (streamer)
	kReady     = "ready"  // bytes of a streamed restore in the buffer and checked
)

// Shard formats.
const (
	FormatWire        = "wire"
	FormatSafetensors = "safetensors"
	FormatRaw         = "raw"
)

type conn struct {
	c       net.Conn
	r       *wire.Reader
	br      *bufio.Reader // under r: raw chunk records are read from it between messages
	bw      *bufio.Writer
	timeout time.Duration
	// who names the other side in errors ("rank 2", "trainer").
	who string
	// stamp, if set, adds the recovery state to every message written;
	// observe, if set, takes it from every message header read (agent
	// links only, not the trainer's).
	stamp, observe func(map[string]string)
}

func newConn(c net.Conn, lim wire.Limits, timeout time.Duration, who string) *conn {
	br := bufio.NewReaderSize(c, 1<<16)
	return &conn{c: c, r: wire.NewReader(br, lim), br: br, bw: bufio.NewWriterSize(c, 1<<20), timeout: timeout, who: who}
}

func (c *conn) Close() error { return c.c.Close() }

// writer starts a message; the caller writes frames, then Close.
func (c *conn) writer(meta map[string]string) *wire.Writer {
	c.arm()
	if c.stamp != nil {
		c.stamp(meta)
	}
	// c.bw is big enough for the wire.Writer to use it as is: its Flush
	// reaches the socket.
	return wire.NewWriterHeader(c.bw, wire.Header{Producer: "ckpt", Meta: meta})
}

// arm pushes the write deadline forward; call it before each frame, so a
// long message has a deadline per frame, not for the whole.
func (c *conn) arm() { _ = c.c.SetWriteDeadline(time.Now().Add(c.timeout)) }

// send writes a whole message and flushes it.
func (c *conn) send(meta map[string]string, frames ...wire.Frame) error {
	w := c.writer(meta)
	for _, f := range frames {
		if err := w.Write(f); err != nil {
			return c.wrap("send", err)
		}
	}
	if err := w.Close(); err != nil {
		return c.wrap("send", err)
	}
	return c.flush()
}

func (c *conn) flush() error {
	_ = c.c.SetWriteDeadline(time.Now().Add(c.timeout))
	return c.wrap("send", c.bw.Flush())
}

// sendError reports a refusal in-band.
func (c *conn) sendError(code string, err error) error {
	return c.send(map[string]string{kOp: "error", kCode: code, kMsg: err.Error()},
		&wire.Error{Code: code, Msg: err.Error(), Rank: -1, Frame: -1})
}

// next reads the next frame of the current message (or the next
// message's header), with a deadline.
func (c *conn) next() (wire.Frame, error) {
	return c.nextWithin(c.timeout)
}

func (c *conn) nextWithin(d time.Duration) (wire.Frame, error) {
	if d > 0 {
		_ = c.c.SetReadDeadline(time.Now().Add(d))
	} else {
		_ = c.c.SetReadDeadline(time.Time{})
	}
	f, err := c.r.NextFrame()
	return f, c.wrap("receive", err)
}

// header reads the next message's header (waiting up to d; 0 for ever).
func (c *conn) header(d time.Duration) (map[string]string, error) {
	f, err := c.nextWithin(d)
	if err != nil {
		return nil, err
	}
	h, ok := f.(*wire.Header)
	if !ok {
		return nil, fmt.Errorf("%s sent a %s frame where a message header belongs", c.who, f.Type())
	}
	if h.Meta == nil {
		h.Meta = map[string]string{}
	}
	if c.observe != nil {
		c.observe(h.Meta)
	}
	return h.Meta, nil
}

// rest reads the data frames of the current message up to its end.
func (c *conn) rest() ([]wire.Frame, error) {
	var out []wire.Frame
	for {
		f, err := c.next()
		if err != nil {
			return nil, err
		}
		if _, ok := f.(*wire.End); ok {
			return out, nil
		}
		if _, ok := f.(*wire.Header); ok {
			return nil, fmt.Errorf("%s: header inside a message", c.who)
		}
		out = append(out, f)
	}
}

// recv reads a whole message; an "error" message becomes an error.
func (c *conn) recv(d time.Duration) (map[string]string, []wire.Frame, error) {
	meta, err := c.header(d)
	if err != nil {
		return nil, nil, err
	}
	frames, err := c.rest()
	if err != nil {
		return nil, nil, err
	}
	if meta[kOp] == "error" {
		return meta, frames, &RemoteError{Who: c.who, Code: meta[kCode], Msg: meta[kMsg]}
	}
	return meta, frames, nil
}

// RemoteError is a refusal the other side reported in-band.
type RemoteError struct {
	Who, Code, Msg string
}

func (e *RemoteError) Error() string { return fmt.Sprintf("%s refused: %s", e.Who, e.Msg) }

// ExitCode: bad input is 2; a peer's failure (a lost group, a replication
// that failed, an iteration abandoned because a rank died or restarted) 3;
// everything else 1.
func (e *RemoteError) ExitCode() int {
	switch e.Code {
	case "bad_input":
		return exit.BadInput
	case "lost", "replication_failed", "abandoned":
		return exit.Peer
	}
	return exit.Failure
}

func (c *conn) wrap(op string, err error) error {
	if err == nil {
		return nil
	}
	var de *wire.DecodeError
	if errors.As(err, &de) {
		return fmt.Errorf("%s: %w", c.who, err)
	}
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, wire.ErrTruncated):
		return fmt.Errorf("%s: %s: connection closed (process died?): %w", c.who, op, err)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%s: %s: no progress for %v (hung, stopped or too slow? see --timeout): %w", c.who, op, c.timeout, err)
	}
	return fmt.Errorf("%s: %s: %w", c.who, op, err)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func metaInt(m map[string]string, k string) (int64, error) {
	s, ok := m[k]
	if !ok {
		return 0, fmt.Errorf("missing %q", k)
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %q is not an integer", k, s)
	}
	return v, nil
}

func metaUint(m map[string]string, k string) (uint64, error) {
	s, ok := m[k]
	if !ok {
		return 0, fmt.Errorf("missing %q", k)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: %q is not a hex digest", k, s)
	}
	return v, nil
}

func hex(v uint64) string { return strconv.FormatUint(v, 16) }
