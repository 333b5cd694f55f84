package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// DefaultGrace is how long a verb has, after SIGINT or SIGTERM, to stop by
// itself before Run stops the process (exit 130, or 143 for SIGTERM).
// Long-running verbs with a shutdown protocol (serve sidecars, the ckpt
// agent) ask for more with IO.SetGrace.
const DefaultGrace = time.Second

// ServiceGrace is the grace of the long-running verbs that say goodbye to
// their peers and fail their clients' requests before they exit (serve,
// ckpt agent, straggle controller).
const ServiceGrace = 10 * time.Second

// ErrInterrupted is what a read of stdin returns once SIGINT or SIGTERM
// has arrived: a verb waiting for input stops at once instead of ignoring
// Ctrl-C until the input ends.
var ErrInterrupted = errors.New("interrupted")

// exitProcess ends the process when a verb overstays its grace; tests
// replace it.
var exitProcess = os.Exit

// SetGrace sets how long this verb may take to stop after SIGINT/SIGTERM
// before the process is stopped for it.
func (rio *IO) SetGrace(d time.Duration) { rio.grace.Store(int64(d)) }

func (rio *IO) graceOrDefault() time.Duration {
	if d := time.Duration(rio.grace.Load()); d > 0 {
		return d
	}
	return DefaultGrace
}

// watchdog stops the process when ctx (the signal context) ends and the
// verb has not returned (done closed) within its grace: every temporary
// file of an uncommitted AtomicFile is removed, a line says why on
// stderr, and the exit code is InterruptCode's.
func watchdog(ctx context.Context, done <-chan struct{}, rio *IO) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	grace := rio.graceOrDefault()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	removeTemps()
	fmt.Fprintf(rio.Stderr, "%s: %v: stopped %v after the signal (the verb had not finished)\n", rio.Tool, context.Cause(ctx), grace)
	exitProcess(InterruptCode(ctx))
}

// temps holds the temporary files of AtomicFiles not yet committed or
// aborted, for the watchdog to remove.
var temps sync.Map

func removeTemps() {
	temps.Range(func(k, _ any) bool {
		os.Remove(k.(string))
		return true
	})
}

// interruptible returns stdin as a reader whose Read returns ErrInterrupted
// once ctx ends, even while it waits for input. A regular file never waits
// for long and is returned as it is.
func interruptible(ctx context.Context, r io.Reader) io.Reader {
	if f, ok := r.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			return r
		}
	}
	return &ctxReader{ctx: ctx, r: r}
}

// ctxReader reads r on a goroutine into its own buffer, so that a Read
// can give up on ctx without that goroutine writing into the caller's
// slice later.
type ctxReader struct {
	ctx     context.Context
	r       io.Reader
	buf     []byte
	res     chan readResult
	waiting bool // a read of r is under way (its result comes on res)
}

type readResult struct {
	n   int
	err error
}

// Read implements io.Reader.
func (c *ctxReader) Read(p []byte) (int, error) {
	if c.ctx.Err() != nil {
		return 0, ErrInterrupted
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !c.waiting {
		if cap(c.buf) < len(p) {
			c.buf = make([]byte, len(p))
		}
		if c.res == nil {
			c.res = make(chan readResult, 1)
		}
		buf := c.buf[:len(p)]
		c.waiting = true
		go func() {
			n, err := c.r.Read(buf)
			c.res <- readResult{n, err}
		}()
	}
	select {
	case r := <-c.res:
		c.waiting = false
		return copy(p, c.buf[:r.n]), r.err
	case <-c.ctx.Done():
		return 0, ErrInterrupted
	}
}
