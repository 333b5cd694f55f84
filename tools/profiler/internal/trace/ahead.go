package trace

import (
	"errors"
	"io"
	"sync"
)

// ahead reads its source in a goroutine, a few chunks in advance, so that
// reading (and gzip decompression) runs on one core while the tokenizer
// runs on another.
type ahead struct {
	full   chan chunk
	free   chan []byte
	done   chan struct{}
	cur    []byte
	buf    []byte
	err    error
	closer sync.Once
}

type chunk struct {
	b   []byte
	err error
}

const (
	aheadChunk = 1 << 20
	aheadDepth = 4
)

func newAhead(src io.Reader) *ahead {
	a := &ahead{full: make(chan chunk, aheadDepth), free: make(chan []byte, aheadDepth+1), done: make(chan struct{})}
	for i := 0; i < aheadDepth+1; i++ {
		a.free <- make([]byte, aheadChunk)
	}
	go a.run(src)
	return a
}

func (a *ahead) run(src io.Reader) {
	for {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.done:
			return
		}
		n, err := io.ReadFull(src, b)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		select {
		case a.full <- chunk{b[:n], err}:
		case <-a.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (a *ahead) Read(p []byte) (int, error) {
	if !a.fill() {
		return 0, a.err
	}
	n := copy(p, a.cur)
	a.cur = a.cur[n:]
	return n, nil
}

// fill waits until a.cur holds bytes; false at the end of the source.
func (a *ahead) fill() bool {
	for len(a.cur) == 0 {
		if a.err != nil {
			return false
		}
		if a.buf != nil {
			a.free <- a.buf[:cap(a.buf)]
			a.buf = nil
		}
		c := <-a.full
		a.buf, a.cur, a.err = c.b, c.b, c.err
	}
	return true
}

// IsStream says whether r, a reader from Open, holds a trainwire stream
// (what `profiler ingest` writes) rather than a JSON trace: its first
// byte starts a msgpack map, the stream's header frame, which no JSON
// text starts with. It reads nothing away.
func IsStream(r io.Reader) bool {
	a, ok := r.(*ahead)
	if !ok || !a.fill() {
		return false
	}
	b := a.cur[0]
	return (b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf
}

// stop ends the goroutine (it may be blocked on a send).
func (a *ahead) stop() { a.closer.Do(func() { close(a.done) }) }
