package serve

import (
	"errors"
	"fmt"
	"net"
	"sync"

	"trainwire.dev/lib/shm"
)

// Client talks to a sidecar (Go tests, benchmarks; Python has its own in
// clients/python). Requests may be in flight from several goroutines.
type Client struct {
	conn *Conn
	mu   sync.Mutex
	next int64
	wait map[int64]chan *Reply
	err  error // set when the connection ended
}

// ErrClosed answers requests pending when the sidecar closed the socket.
var ErrClosed = errors.New("serve: the sidecar closed the connection")

// Dial connects to the sidecar's socket.
func Dial(path string) (*Client, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("serve: dial %s: %w", path, err)
	}
	cl := &Client{conn: NewConn(c, DefaultLimits.MaxMessage+(1<<20)), next: 1, wait: map[int64]chan *Reply{}}
	go cl.read()
	return cl, nil
}

func (c *Client) read() {
	for {
		msg, fds, err := c.conn.ReadMessage()
		closeFDs(fds)
		var r *Reply
		if err == nil {
			r, err = DecodeReply(msg)
		}
		if err != nil {
			c.mu.Lock()
			c.err = err
			for id, ch := range c.wait {
				ch <- &Reply{ID: id, Code: "closed", Error: ErrClosed.Error(), Rank: -1}
				delete(c.wait, id)
			}
			c.mu.Unlock()
			return
		}
		c.mu.Lock()
		ch := c.wait[r.ID]
		delete(c.wait, r.ID)
		c.mu.Unlock()
		if ch != nil {
			ch <- r
		}
	}
}

// Go sends req with a fresh id (returned) and returns the channel its
// reply will come on. fd, when ≥ 0, travels with the message (attach).
func (c *Client) Go(req *Request, fd int) (int64, <-chan *Reply, error) {
	ch := make(chan *Reply, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, nil, ErrClosed
	}
	id := c.next
	c.next++
	c.wait[id] = ch
	c.mu.Unlock()
	r := *req
	r.ID = id
	body := AppendRequest(nil, &r)
	var err error
	if fd >= 0 {
		err = c.conn.WriteMessageFD(body, fd)
	} else {
		err = c.conn.WriteMessage(body)
	}
	if err != nil {
		c.mu.Lock()
		delete(c.wait, id)
		c.mu.Unlock()
		return 0, nil, fmt.Errorf("serve: send request %d: %w", id, err)
	}
	return id, ch, nil
}

// Do sends req and waits for its reply; a failed reply is an error.
func (c *Client) Do(req *Request) (*Reply, error) {
	_, ch, err := c.Go(req, -1)
	if err != nil {
		return nil, err
	}
	r := <-ch
	return r, r.Err()
}

// Attach hands seg to the sidecar under id; it returns the size mapped.
func (c *Client) Attach(seg *shm.Segment, id int64) (int64, error) {
	_, ch, err := c.Go(&Request{Op: OpAttach, Seg: id}, seg.FD())
	if err != nil {
		return 0, err
	}
	r := <-ch
	return r.Size, r.Err()
}

// SendRaw writes a message body as it is (tests of malformed requests).
func (c *Client) SendRaw(body []byte) error { return c.conn.WriteMessage(body) }

// Expect registers a reply channel for id (for SendRaw requests).
func (c *Client) Expect(id int64) <-chan *Reply {
	ch := make(chan *Reply, 1)
	c.mu.Lock()
	if c.err != nil {
		ch <- &Reply{ID: id, Code: "closed", Error: ErrClosed.Error(), Rank: -1}
	} else {
		c.wait[id] = ch
	}
	c.mu.Unlock()
	return ch
}

// Close disconnects (the sidecar then exits).
func (c *Client) Close() error { return c.conn.c.Close() }
