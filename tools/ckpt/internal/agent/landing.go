package agent

import (
	"context"
	"sync"

	"trainwire.dev/tools/ckpt/internal/store"
)

// lander hears where a shard fetched from a peer lands and how much of it
// has arrived: fetch calls begin once the buffer exists (again for every
// holder it tries) and advance after each chunk passed its CRC32C.
type lander interface {
	begin(path string, in store.Info, from int)
	advance(ready int64)
}

// landing is a lander others can watch: a fetch in flight publishes its
// progress here, and a streamed restore that waits for that fetch (a
// replacement agent's heal) follows it and tells its trainer.
type landing struct {
	mu      sync.Mutex
	st      landed
	changed chan struct{} // closed and replaced at every change
}

// landed is a landing's state at one moment.
type landed struct {
	gen   int // counts begins: a new buffer (another holder) each
	path  string
	in    store.Info
	from  int
	ready int64
}

func newLanding() *landing { return &landing{changed: make(chan struct{})} }

func (l *landing) begin(path string, in store.Info, from int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.st = landed{gen: l.st.gen + 1, path: path, in: in, from: from}
	l.notify()
}

func (l *landing) advance(ready int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ready > l.st.ready {
		l.st.ready = ready
		l.notify()
	}
}

func (l *landing) notify() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// now returns the state and a channel closed at its next change.
func (l *landing) now() (landed, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.st, l.changed
}

// landers tells every one of its landers.
type landers []lander

func (ls landers) begin(path string, in store.Info, from int) {
	for _, l := range ls {
		l.begin(path, in, from)
	}
}

func (ls landers) advance(ready int64) {
	for _, l := range ls {
		l.advance(ready)
	}
}

// streamer answers a streamed shared-memory restore (mode shm, stream 1):
// the trainer gets the buffer's path as soon as it exists and maps it, then
// a "progress" message each time more of the shard has arrived and passed
// its CRC32C (it copies that much out while the rest is on the wire), a
// "moved" message if the agent has to start over in another buffer
// (another holder, or the persistent tier), and "done" once the whole
// shard matched its commit record's XXH3 — or an error, after which what
// the trainer copied is not the checkpoint. A local restore sends its
// whole length at once and checks the digest while the trainer copies.
type streamer struct {
	cn              *conn
	iter, committed int64
	told            bool   // the trainer has the first answer
	path            string // the buffer the trainer was last told of
	size, sent      int64  // its length, and what the trainer was told has arrived
	err             error  // the first failed send: nothing more is sent
	spec            *speculation
}

// progressStep is the least progress worth a message (fetches call
// advance once per chunk, R/p bytes).
const progressStep = 4 << 20

// begin tells the trainer the shard (in) lands in path, from rank from
// (−1: this agent's memory, −2: the persistent tier, source names it).
func (s *streamer) begin(path string, in store.Info, from int) {
	s.announce(path, in, sourceOf(from), 0)
}

func sourceOf(from int) string {
	if from < 0 {
		return "local"
	}
	return "peer:" + itoa(int64(from))
}

// announce sends the first answer, or "moved" when the trainer was told of
// another buffer; the same buffer again only moves ready forward.
func (s *streamer) announce(path string, in store.Info, source string, ready int64) {
	if s.told && path == s.path {
		s.advance(ready)
		return
	}
	op := "ok"
	if s.told {
		op = "moved"
	}
	s.told, s.path, s.size, s.sent = true, path, in.Len, ready
	s.send(map[string]string{kOp: op, kIter: itoa(s.iter), kLen: itoa(in.Len), kXXH3: hex(in.XXH3), kFormat: in.Format,
		kSource: source, kCommitted: itoa(s.committed), kPath: path, kStream: "1", kReady: itoa(ready)})
}

func (s *streamer) advance(ready int64) {
	if ready > s.sent && (ready-s.sent >= progressStep || ready == s.size) {
		s.sent = ready
		s.send(map[string]string{kOp: "progress", kReady: itoa(ready)})
	}
}

func (s *streamer) send(m map[string]string) {
	if s.err == nil {
		s.err = s.cn.send(m)
	}
}

// done tells the trainer the whole shard is in and checked.
func (s *streamer) done() error {
	s.advance(s.size)
	s.send(map[string]string{kOp: "done", kReady: itoa(s.size)})
	return s.err
}

// follow relays a fetch in flight that this restore waits for: its
// landing, until wait is closed (the fetch ended, well or not).
func (s *streamer) follow(ctx context.Context, l *landing, wait <-chan struct{}) error {
	gen := 0
	for {
		st, changed := l.now()
		if st.gen > 0 {
			if st.gen != gen {
				gen = st.gen
				s.begin(st.path, st.in, st.from)
			}
			s.advance(st.ready)
		}
		if s.err != nil {
			return s.err
		}
		select {
		case <-changed:
		case <-wait:
			st, _ = l.now()
			if st.gen == gen && gen > 0 {
				s.advance(st.ready)
			}
			return s.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
