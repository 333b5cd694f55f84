package serve

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"trainwire.dev/lib/shm"
)

// Conn frames messages on a Unix stream socket: each message is a 4-byte
// big-endian length n, then n bytes holding one msgpack map. A descriptor
// sent with SCM_RIGHTS belongs to the message whose bytes it came with.
// Reads are for one goroutine; writes may come from several.
type Conn struct {
	c   *net.UnixConn
	max int

	buf  []byte // bytes received and not yet returned: buf[r:w]
	r, w int
	base int64  // stream offset of buf[0]
	fds  []fdAt // descriptors received, not yet handed out

	wmu sync.Mutex
	out []byte
}

type fdAt struct {
	fd int
	at int64 // stream offset of the first byte of the read that brought it
}

// NewConn frames c, refusing messages longer than maxMessage bytes.
func NewConn(c *net.UnixConn, maxMessage int) *Conn {
	return &Conn{c: c, max: maxMessage, buf: make([]byte, 64<<10)}
}

// FrameError is a broken frame: the connection cannot be read further.
type FrameError struct {
	Offset int64
	Err    error
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("serve: framing at byte %d: %v", e.Offset, e.Err)
}
func (e *FrameError) Unwrap() error { return e.Err }

// ReadMessage returns the next message and the descriptors that came with
// its bytes (the caller owns them). io.EOF: the peer closed between
// messages; a *FrameError otherwise.
func (c *Conn) ReadMessage() (msg []byte, fds []int, err error) {
	start := c.base + int64(c.r)
	if err := c.fill(4); err != nil {
		if err == io.EOF && c.w == c.r {
			return nil, nil, io.EOF
		}
		return nil, nil, &FrameError{Offset: start, Err: err}
	}
	n := binary.BigEndian.Uint32(c.buf[c.r:])
	if uint64(n) > uint64(c.max) {
		return nil, nil, &FrameError{Offset: start, Err: fmt.Errorf("message of %d bytes, at most %d (--max-request)", n, c.max)}
	}
	// The prefix stays unread until the whole message is in: a read that
	// fails on a deadline can be tried again.
	if err := c.fill(4 + int(n)); err != nil {
		return nil, nil, &FrameError{Offset: start, Err: fmt.Errorf("message of %d bytes: %w", n, err)}
	}
	c.r += 4
	msg = make([]byte, n)
	copy(msg, c.buf[c.r:c.r+int(n)])
	c.r += int(n)
	end := c.base + int64(c.r)
	keep := c.fds[:0]
	for _, f := range c.fds {
		if f.at < end {
			fds = append(fds, f.fd)
		} else {
			keep = append(keep, f)
		}
	}
	c.fds = keep
	return msg, fds, nil
}

// fill makes buf[r:] hold at least n bytes.
func (c *Conn) fill(n int) error {
	if c.w-c.r >= n {
		return nil
	}
	if c.r > 0 { // slide what is left to the front
		copy(c.buf, c.buf[c.r:c.w])
		c.base += int64(c.r)
		c.w -= c.r
		c.r = 0
	}
	if n > len(c.buf) {
		nb := make([]byte, n)
		copy(nb, c.buf[:c.w])
		c.buf = nb
	}
	for c.w < n {
		k, fds, err := shm.RecvMsg(c.c, c.buf[c.w:])
		for _, fd := range fds {
			c.fds = append(c.fds, fdAt{fd: fd, at: c.base + int64(c.w)})
		}
		c.w += k
		if errors.Is(err, io.EOF) || (err == nil && k == 0 && len(fds) == 0) {
			return io.EOF
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// WriteMessage writes one message (prefix and body).
func (c *Conn) WriteMessage(body []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.out = binary.BigEndian.AppendUint32(c.out[:0], uint32(len(body)))
	c.out = append(c.out, body...)
	_, err := c.c.Write(c.out)
	if cap(c.out) > 1<<20 {
		c.out = nil
	}
	return err
}

// WriteMessageFD writes one message with fd attached (clients: attach).
func (c *Conn) WriteMessageFD(body []byte, fd int) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	b := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	return shm.SendFD(c.c, append(b, body...), fd)
}

// SetReadDeadline bounds the reads in progress and to come; a read past
// it fails.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }

// Unread is how many bytes the peer has sent that the kernel holds and
// no read has taken yet.
func (c *Conn) Unread() int {
	rc, err := c.c.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n
}

// Close closes the socket and any descriptor received but not handed out.
func (c *Conn) Close() error {
	for _, f := range c.fds {
		unix.Close(f.fd)
	}
	c.fds = nil
	return c.c.Close()
}
