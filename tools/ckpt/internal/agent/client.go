package agent

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"trainwire.dev/lib/wire"
)

// Client talks to the local agent on its Unix socket: what `ckpt save`,
// `ckpt restore` and `ckpt status` use (a trainer can speak the same
// messages with any msgpack library; see docs/ckpt.md).
type Client struct {
	cn *conn
}

// Dial connects to the agent's socket.
func Dial(socket string, timeout time.Duration, lim wire.Limits) (*Client, error) {
	c, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return nil, fmt.Errorf("agent socket %s: %w (is `ckpt agent` running for this rank?)", socket, err)
	}
	return &Client{cn: newConn(c, lim, timeout, "agent")}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cn.Close() }

// Result is the agent's answer.
type Result = map[string]string

func waitMeta(iter int64, format string, wait time.Duration) map[string]string {
	m := map[string]string{kOp: "save", kIter: itoa(iter), kFormat: format}
	if wait >= 0 {
		m[kWait] = wait.String()
	}
	return m
}

// SaveStream sends the data frames read from r (a trainwire stream) as the
// shard of iter. wait < 0 uses the agent's --commit-wait.
func (c *Client) SaveStream(iter int64, r *wire.Reader, wait time.Duration) (Result, error) {
	w := c.cn.writer(waitMeta(iter, FormatWire, wait))
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if err := w.Write(f); err != nil {
			return nil, c.refusal(c.cn.wrap("send", err))
		}
	}
	if err := w.Close(); err != nil {
		return nil, c.refusal(c.cn.wrap("send", err))
	}
	if err := c.cn.flush(); err != nil {
		return nil, err
	}
	m, _, err := c.cn.recv(0)
	return m, err
}

// SaveBytes sends data (a safetensors file or raw bytes) in chunks.
func (c *Client) SaveBytes(iter int64, format string, data []byte, chunk int64, wait time.Duration) (Result, error) {
	w := c.cn.writer(waitMeta(iter, format, wait))
	if chunk <= 0 {
		chunk = 8 << 20
	}
	for off := int64(0); off < int64(len(data)) || off == 0; off += chunk {
		n := min(chunk, int64(len(data))-off)
		b := data[off : off+n]
		if err := w.Write(&wire.Chunk{Iter: iter, ReplicaOf: -1, SrcRank: -1, Offset: off, Len: n, TotalLen: int64(len(data)), CRC32C: wire.CRC32C(b), Data: b}); err != nil {
			return nil, c.refusal(c.cn.wrap("send", err))
		}
		if len(data) == 0 {
			break
		}
	}
	if err := w.Close(); err != nil {
		return nil, c.cn.wrap("send", err)
	}
	if err := c.cn.flush(); err != nil {
		return nil, err
	}
	m, _, err := c.cn.recv(0)
	return m, err
}

// SaveFile asks the agent to read path (a file in shared memory written by
// the trainer) as the shard of iter.
func (c *Client) SaveFile(iter int64, format, path string, wait time.Duration) (Result, error) {
	m := waitMeta(iter, format, wait)
	m[kPath] = path
	if err := c.cn.send(m); err != nil {
		return nil, err
	}
	r, _, err := c.cn.recv(0)
	return r, err
}

// SaveShm is the fast path: begin (the agent hands over a shared-memory
// buffer of size bytes), fill (the caller writes the state into it), commit.
func (c *Client) SaveShm(iter, size int64, format string, wait time.Duration, fill func([]byte) error) (Result, error) {
	m := waitMeta(iter, format, wait)
	m[kOp], m[kLen] = "begin", itoa(size)
	if err := c.cn.send(m); err != nil {
		return nil, err
	}
	r, _, err := c.cn.recv(0)
	if err != nil {
		return nil, err
	}
	if size > 0 {
		f, err := os.OpenFile(r[kPath], os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("open the agent's buffer %s: %w", r[kPath], err)
		}
		mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("map the agent's buffer: %w", err)
		}
		err = fill(mem)
		_ = unix.Munmap(mem)
		if err != nil {
			return nil, err
		}
	}
	if err := c.cn.send(map[string]string{kOp: "commit", kIter: itoa(iter)}); err != nil {
		return nil, err
	}
	r, _, err = c.cn.recv(0)
	return r, err
}

// refusal returns the agent's in-band refusal that explains a failed
// write (the agent refuses, then closes), else err.
func (c *Client) refusal(err error) error {
	if _, _, rerr := c.cn.recv(2 * time.Second); rerr != nil {
		var re *RemoteError
		if errors.As(rerr, &re) {
			return re
		}
	}
	return err
}

// Wait waits until iter is globally committed.
func (c *Client) Wait(iter int64, d time.Duration) (Result, error) {
	if err := c.cn.send(map[string]string{kOp: "wait", kIter: itoa(iter), kWait: d.String()}); err != nil {
		return nil, err
	}
	m, _, err := c.cn.recv(0)
	return m, err
}

// restoreMeta is the request for iteration iter (< 0: the latest
// committed one) in mode.
func restoreMeta(iter int64, mode string) map[string]string {
	m := map[string]string{kOp: "restore", kMode: mode}
	if iter < 0 {
		m[kLatest] = "1"
	} else {
		m[kIter] = itoa(iter)
	}
	return m
}

// Restore asks for the latest committed iteration (iter < 0) or iter.
// Mode "chunks" writes the shard's bytes to w; "frames" writes the saved
// data frames to fw, or passes them to each when fw is nil (shared
// memory: RestoreShm).
func (c *Client) Restore(iter int64, mode string, w io.Writer, fw *wire.Writer, each func(wire.Frame) error) (Result, error) {
	if err := c.cn.send(restoreMeta(iter, mode)); err != nil {
		return nil, err
	}
	r, err := c.cn.header(0)
	if err != nil {
		return nil, err
	}
	if r[kOp] == "error" {
		_, _ = c.cn.rest()
		return r, &RemoteError{Who: "agent", Code: r[kCode], Msg: r[kMsg]}
	}
	size, _ := metaInt(r, kLen)
	switch mode {
	case "shm":
		return nil, errors.New("agent: Restore: use RestoreShm for shared memory")
	case "frames":
		for {
			f, err := c.cn.next()
			if err != nil {
				return nil, err
			}
			if _, ok := f.(*wire.End); ok {
				return r, nil
			}
			if fw != nil {
				err = fw.Write(f)
			} else {
				err = each(f)
			}
			if err != nil {
				return nil, err
			}
		}
	default:
		var next int64
		for {
			f, err := c.cn.next()
			if err != nil {
				return nil, err
			}
			switch f := f.(type) {
			case *wire.End:
				if next != size {
					return nil, fmt.Errorf("agent: shard ended at byte %d of %d", next, size)
				}
				return r, nil
			case *wire.Chunk:
				if f.Offset != next {
					return nil, fmt.Errorf("agent: chunk at %d, expected %d", f.Offset, next)
				}
				if _, err := w.Write(f.Data); err != nil {
					return nil, err
				}
				next += f.Len
			}
		}
	}
}

// Status returns the agent's status message and frames.
func (c *Client) Status() (Result, []wire.Frame, error) {
	if err := c.cn.send(map[string]string{kOp: "status"}); err != nil {
		return nil, nil, err
	}
	return c.cn.recv(0)
}

// SendRaw writes b on the socket as is (tests: garbage from a trainer).
func (c *Client) SendRaw(b []byte) error {
	_, err := io.Copy(c.cn.c, bytes.NewReader(b))
	return err
}

// Recv reads one message (tests).
func (c *Client) Recv() (Result, error) {
	m, _, err := c.cn.recv(0)
	return m, err
}

// RestoreShm restores the latest committed iteration (iter < 0) or iter
// through the agent's shared memory, streamed: use gets the buffer the
// shard lands in, mapped read-only, as soon as it exists, and ready, which
// blocks until the first n bytes are in it and passed their chunk CRCs (a
// shard fetched from a peer arrives while use copies it out; one in local
// memory is all there at once). The agent may move the restore to another
// buffer (the holder it fetched from failed and another serves it): use is
// then called again, from the start. What use copied is the checkpoint only
// if RestoreShm returns nil: the agent checked the whole shard against its
// commit record's digest.
func (c *Client) RestoreShm(iter int64, use func(mem []byte, ready func(n int64) error) error) (Result, error) {
	m := restoreMeta(iter, "shm")
	m[kStream] = "1"
	if err := c.cn.send(m); err != nil {
		return nil, err
	}
	r, _, err := c.cn.recv(0)
	if err != nil {
		return nil, err
	}
	for {
		st := &shmStream{c: c}
		if err := st.start(r); err != nil {
			if r[kStream] == "1" {
				// The buffer may be gone because the agent gave up on
				// it: its verdict says why.
				if _, _, e := c.cn.recv(0); e != nil {
					return nil, e
				}
			}
			return nil, err
		}
		err = st.run(use)
		var mv *movedError
		if errors.As(err, &mv) {
			r = mv.meta
			continue
		}
		if err != nil {
			return nil, err
		}
		r = st.meta
		break
	}
	if err := c.cn.send(map[string]string{kOp: "release"}); err != nil {
		return nil, err
	}
	if _, _, err := c.cn.recv(0); err != nil {
		return nil, err
	}
	return r, nil
}

// movedError is what a streamed restore's ready returns when the agent
// moved the restore to another buffer (meta: its answer).
type movedError struct{ meta map[string]string }

func (e *movedError) Error() string {
	return "agent: the restore moved to another buffer (" + e.meta[kSource] + ")"
}

// shmStream is one buffer of a streamed restore on the client side.
type shmStream struct {
	c           *Client
	meta        map[string]string
	mem         []byte
	size, ready int64
	done        bool // the agent checked the whole shard
}

// start maps the buffer the answer r names.
func (s *shmStream) start(r map[string]string) error {
	s.meta = r
	size, err := metaInt(r, kLen)
	ready, e2 := metaInt(r, kReady)
	if r[kStream] == "1" {
		err = errors.Join(err, e2)
	}
	if err != nil || size < 0 || ready < 0 || ready > size {
		return fmt.Errorf("agent: bad restore answer: len %q, ready %q", r[kLen], r[kReady])
	}
	s.size, s.ready, s.done = size, ready, r[kStream] != "1"
	if s.done {
		s.ready = size // an agent that does not stream answers when all is checked
	}
	if size == 0 {
		return nil
	}
	f, err := os.Open(r[kPath])
	if err != nil {
		return err
	}
	defer f.Close()
	// MAP_POPULATE, unlike the Python client's mapping: this one is read by
	// write(2) into --output, and faulting it in from inside the write
	// doubled the time (512 MiB into /dev/shm, median of 5: 874 against
	// 430 ms).
	s.mem, err = unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	return err
}

// run calls use, then waits for the agent's verdict on the whole shard.
func (s *shmStream) run(use func(mem []byte, ready func(n int64) error) error) error {
	defer func() {
		if s.mem != nil {
			_ = unix.Munmap(s.mem)
		}
	}()
	if err := use(s.mem, s.wait); err != nil {
		return err
	}
	for !s.done {
		if err := s.next(); err != nil {
			return err
		}
	}
	return nil
}

// wait blocks until the first n bytes are in the buffer.
func (s *shmStream) wait(n int64) error {
	for s.ready < min(n, s.size) {
		if err := s.next(); err != nil {
			return err
		}
	}
	return nil
}

// next reads one message of the stream.
func (s *shmStream) next() error {
	if s.done {
		return errors.New("agent: restore ended")
	}
	m, _, err := s.c.cn.recv(0)
	if err != nil {
		return err
	}
	switch m[kOp] {
	case "progress", "done":
		n, err := metaInt(m, kReady)
		if err != nil || n < s.ready || n > s.size {
			return fmt.Errorf("agent: restore progress %q after %d of %d bytes", m[kReady], s.ready, s.size)
		}
		s.ready, s.done = n, m[kOp] == "done"
		if s.done && n != s.size {
			return fmt.Errorf("agent: restore done at byte %d of %d", n, s.size)
		}
		return nil
	case "moved":
		return &movedError{meta: m}
	}
	return fmt.Errorf("agent: %q message in a streamed restore", m[kOp])
}
