package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/shm"
)

// Executor runs a tool's sync requests on this rank's side of the job.
type Executor interface {
	// Check refuses a request this rank cannot run, with a *RequestError
	// naming the field, before the ranks agree to run it.
	Check(req *Request) error
	// Sync runs the collective. data[i] holds tensor i's bytes (in its
	// segment, or a copy of the inline bytes, 8-byte aligned); the results
	// replace them in place. A failure that leaves the other ranks waiting
	// must abort the job.
	Sync(ctx context.Context, req *Request, data [][]byte) error
}

// InfoExecutor is an Executor whose sync replies carry figures beside
// the data (the reply's info map: straggle's round, rounds and
// contributors). The server calls SyncInfo instead of Sync.
type InfoExecutor interface {
	Executor
	SyncInfo(ctx context.Context, req *Request, data [][]byte) (map[string]int64, error)
}

// AllToAllExecutor is an Executor that also answers alltoall requests.
// Server refuses them (field op) for one that is not.
type AllToAllExecutor interface {
	Executor
	// CheckAllToAll refuses an alltoall request this rank cannot run (its
	// tensors' bytes are data), with a *RequestError naming the field,
	// before the ranks agree to run it.
	CheckAllToAll(req *Request, data [][]byte) error
	// AllToAll runs it and returns the reply's data: for each pair of
	// tensors, the split sizes received (i64) and the rows received, in
	// rank order.
	AllToAll(ctx context.Context, req *Request, data [][]byte) ([][]byte, error)
}

// Job is what the sidecar serves: a *mesh.Mesh.
type Job interface {
	Aborted() <-chan struct{}
	Err() error
	Abort(cause error)
}

// Server answers one client's requests on one rank (docs/serve.md).
type Server struct {
	Exec Executor
	// Agree is nil in a world of one rank, and for a tool whose ranks'
	// requests need not pair up one to one (straggle).
	Agree  Agreer
	Job    Job
	Rank   int
	Limits Limits
	Log    *slog.Logger
	// Tolerant: the job goes on without this rank (straggle's RNA), so
	// neither a client that leaves with requests pending nor a shutdown
	// aborts it. Instead the context of the sync in progress is cancelled
	// (cause ErrClientGone, or the shutdown's) and the requests still
	// queued fail without running.
	Tolerant bool
}

// ErrClientGone is Serve's result when the client disconnected: the
// sidecar's normal end.
var ErrClientGone = errors.New("serve: the client disconnected")

// Serve accepts one client on ln (then closes ln, which removes the
// socket) and answers its requests until it disconnects (ErrClientGone),
// ctx ends (its cause), the job fails (the mesh's error) or the client
// breaks the framing (a *FrameError). Requests pending then fail with a
// reply saying why.
func (s *Server) Serve(ctx context.Context, ln *net.UnixListener) error {
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	c, err := s.accept(ctx, ln)
	if err != nil {
		return err
	}
	ss := &session{Server: s, conn: NewConn(c, s.Limits.withDefaults().MaxMessage), lim: s.Limits.withDefaults(),
		queue: make(chan item, 1024), gone: make(chan struct{}), segs: map[int64]*shm.Segment{}}
	defer ss.close()
	// The requests run under work: ctx, and in a tolerant job the client's
	// departure too.
	work, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	ss.work, ss.cancelWork = work, cancel
	return ss.run(ctx)
}

// accept waits for a client of this user (SO_PEERCRED); others are
// closed unanswered.
func (s *Server) accept(ctx context.Context, ln *net.UnixListener) (*net.UnixConn, error) {
	type res struct {
		c   *net.UnixConn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		for {
			c, err := ln.AcceptUnix()
			if err == nil && !sameUser(c) {
				s.Log.Warn("serve: refused a client of another user")
				c.Close()
				continue
			}
			ch <- res{c, err}
			return
		}
	}()
	defer ln.Close()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fmt.Errorf("serve: accept: %w", r.err)
		}
		s.Log.Info("serve: client connected")
		return r.c, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	case <-s.Job.Aborted():
		return nil, s.Job.Err()
	}
}

func sameUser(c *net.UnixConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	ok := false
	_ = rc.Control(func(fd uintptr) {
		cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		ok = err == nil && int(cred.Uid) == os.Getuid()
	})
	return ok
}

// item is a request queued for the worker: decoded (err: why not).
type item struct {
	req *Request
	err error
	fds []int
}

// session is one client's connection: a reader goroutine that decodes and
// answers pings at once, and the worker (run) that executes everything
// else in request order.
type session struct {
	*Server
	conn    *Conn
	lim     Limits
	queue   chan item
	gone    chan struct{} // closed when the reader stops
	readErr error         // why it stopped (set before gone is closed)
	pending atomic.Int64  // requests read and not yet answered
	left    atomic.Bool   // the client left with requests pending: the job was aborted for it
	// stopping: the session is failing what is left (fail); the reader's
	// end then says nothing about the client.
	stopping atomic.Bool
	segs     map[int64]*shm.Segment
	seq      int64 // collectives run (or refused) so far
	// work is the requests' context; cancelWork ends it (Tolerant: when
	// the client leaves with requests pending).
	work       context.Context
	cancelWork context.CancelCauseFunc
}

func (ss *session) close() {
	ss.conn.Close()
	for _, s := range ss.segs {
		s.Close()
	}
}

func (ss *session) run(ctx context.Context) error {
	go ss.read(ctx)
	gone := ss.gone
	for {
		if gone == nil && ss.pending.Load() == 0 {
			return ss.readErr
		}
		select {
		case it := <-ss.queue:
			if err := ss.answer(ss.work, it); err != nil {
				return ss.ended(err)
			}
		case <-gone:
			gone = nil
		case <-ctx.Done():
			err := context.Cause(ctx)
			ss.fail(CodeShutdown, fmt.Errorf("rank %d: sidecar stopping: %w", ss.Rank, err))
			return err
		case <-ss.Job.Aborted():
			err := ss.Job.Err()
			ss.fail(CodePeer, err)
			return ss.ended(err)
		}
	}
}

// ended is the session's result for a job failure: ErrClientGone when
// the failure is the abort this client's departure caused.
func (ss *session) ended(err error) error {
	if ss.left.Load() {
		return ErrClientGone
	}
	return err
}

// answer executes one queued request and replies; a job-wide failure
// fails every request still queued and is returned.
func (ss *session) answer(ctx context.Context, it item) error {
	rep := ss.execute(ctx, it)
	// The request is over on this rank (no peer waits on it): count it
	// answered before the client can read the reply, or a client that
	// closes as soon as it has it would leave "with a request pending"
	// and abort the job.
	ss.pending.Add(-1)
	ss.reply(rep)
	if err := ss.Job.Err(); err != nil {
		ss.fail(CodePeer, err)
		return err
	}
	return nil
}

// lingerRead is how long a stopping session goes on reading requests the
// client had already sent, to fail them rather than close on them.
const lingerRead = 100 * time.Millisecond

// fail ends the session on a job failure or shutdown: every request the
// client has sent fails with err, those queued and those still in the
// socket (read until lingerRead passes with nothing new), so that no
// client sees the connection close on a request it sent before then.
func (ss *session) fail(code string, err error) {
	ss.stopping.Store(true)
	ss.drain(code, err)
	_ = ss.conn.SetReadDeadline(time.Now().Add(lingerRead))
	for {
		select {
		case it := <-ss.queue:
			ss.refuse(it, code, err)
		case <-ss.gone:
			ss.drain(code, err)
			return
		}
	}
}

// drain fails every queued request with err; when requests are still
// pending (one in a collective), the job is aborted so that no rank waits.
func (ss *session) drain(code string, err error) {
	if ss.pending.Load() > 0 && ss.Job.Err() == nil && !ss.Tolerant {
		ss.Job.Abort(err)
	}
	for {
		select {
		case it := <-ss.queue:
			ss.refuse(it, code, err)
		default:
			return
		}
	}
}

// refuse answers a queued request with a failure, unrun.
func (ss *session) refuse(it item, code string, err error) {
	closeFDs(it.fds)
	ss.pending.Add(-1)
	ss.reply(failure(it.req.ID, code, err))
}

func (ss *session) reply(r *Reply) {
	if err := ss.conn.WriteMessage(AppendReply(nil, r)); err != nil {
		ss.Log.Debug("serve: reply not sent", "id", r.ID, "err", err)
	}
}

// read decodes requests as they come: pings are answered here, the rest
// queued in order.
func (ss *session) read(ctx context.Context) {
	defer close(ss.gone)
	var lingered time.Duration
	for {
		msg, fds, err := ss.conn.ReadMessage()
		if err != nil && ss.lingers(err, &lingered) {
			continue
		}
		if err != nil {
			ss.readErr = ErrClientGone
			var fe *FrameError
			if errors.As(err, &fe) {
				ss.readErr = fe
			}
			if n := ss.pending.Load(); n > 0 && !ss.stopping.Load() {
				ss.left.Store(true)
				if ss.Tolerant {
					ss.cancelWork(ErrClientGone)
				} else {
					ss.Job.Abort(fmt.Errorf("its client disconnected with %d request(s) pending", n))
				}
			}
			return
		}
		req, derr := DecodeRequest(msg, ss.lim)
		if req.Op == OpPing || ((req.Op == OpAttach || req.Op == OpDetach) && derr != nil) {
			closeFDs(fds)
			if derr != nil {
				ss.reply(failure(req.ID, CodeBadRequest, derr))
			} else {
				ss.reply(&Reply{ID: req.ID, OK: true, Rank: -1})
			}
			continue
		}
		if req.Op != OpAttach {
			closeFDs(fds)
			fds = nil
		}
		ss.pending.Add(1)
		if !ss.enqueue(ctx, item{req: req, err: derr, fds: fds}) {
			return
		}
	}
}

// lingers says whether a stopping session's reader, whose read err ended
// on the linger deadline, should read on: the client's bytes wait in the
// socket (a busy machine may run the reader late), and the reader has
// not lingered a second in all.
func (ss *session) lingers(err error, lingered *time.Duration) bool {
	if !ss.stopping.Load() || !errors.Is(err, os.ErrDeadlineExceeded) || ss.conn.Unread() == 0 || *lingered >= time.Second {
		return false
	}
	*lingered += lingerRead
	_ = ss.conn.SetReadDeadline(time.Now().Add(lingerRead))
	return true
}

// enqueue hands a request to the worker; false when ctx ended first.
// While there is room the request is queued even after ctx ended: a
// stopping worker fails it rather than leave it unanswered.
func (ss *session) enqueue(ctx context.Context, it item) bool {
	select {
	case ss.queue <- it:
		return true
	default:
	}
	select {
	case ss.queue <- it:
		return true
	case <-ctx.Done():
		closeFDs(it.fds)
		ss.pending.Add(-1)
		return false
	}
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// execute runs one queued request and returns its reply.
func (ss *session) execute(ctx context.Context, it item) *Reply {
	req := it.req
	switch req.Op {
	case OpAttach:
		return ss.attach(req, it.fds)
	case OpDetach:
		s, ok := ss.segs[req.Seg]
		if !ok {
			return failure(req.ID, CodeBadRequest, &RequestError{ID: req.ID, Field: "seg", Err: fmt.Errorf("segment %d is not attached", req.Seg)})
		}
		s.Close()
		delete(ss.segs, req.Seg)
		return &Reply{ID: req.ID, OK: true, Rank: -1}
	}
	return ss.sync(ctx, req, it.err)
}

func (ss *session) attach(req *Request, fds []int) *Reply {
	fail := func(err error) *Reply {
		closeFDs(fds)
		return failure(req.ID, CodeBadRequest, &RequestError{ID: req.ID, Field: "seg", Err: err})
	}
	switch {
	case len(fds) != 1:
		return fail(fmt.Errorf("attach needs exactly one descriptor sent with the message (SCM_RIGHTS), got %d", len(fds)))
	case ss.segs[req.Seg] != nil:
		return fail(fmt.Errorf("segment %d is attached already (detach it first)", req.Seg))
	case len(ss.segs) >= ss.lim.MaxSegments:
		return fail(fmt.Errorf("%d segments attached already, at most %d", len(ss.segs), ss.lim.MaxSegments))
	}
	s, err := shm.Map(fds[0])
	if err != nil {
		return failure(req.ID, CodeBadRequest, &RequestError{ID: req.ID, Field: "seg", Err: err})
	}
	ss.segs[req.Seg] = s
	return &Reply{ID: req.ID, OK: true, Rank: -1, Size: s.Size()}
}

// sync refuses or runs a collective request. Every rank agrees first, so
// a request refused on one rank fails on every rank, in step.
func (ss *session) sync(ctx context.Context, req *Request, bad error) *Reply {
	ss.seq++
	var data [][]byte
	if bad == nil {
		data, bad = ss.resolve(req)
	}
	if bad == nil {
		bad = ss.check(req, data)
	}
	v := Verdict{Step: req.Step, Tensors: len(req.Tensors)}
	for i := range req.Tensors {
		v.Bytes += req.Tensors[i].Bytes()
	}
	if req.Op == OpAllToAll {
		v.Bytes = AllToAllBytes
	}
	if bad != nil {
		v.Bad = bad.Error()
	}
	var agreed error
	if ss.Agree != nil {
		agreed = ss.Agree.Agree(ctx, ss.seq, v)
	}
	switch {
	case bad != nil:
		return failure(req.ID, CodeBadRequest, bad)
	case agreed != nil:
		return failure(req.ID, codeOf(agreed), agreed)
	}
	if ctx.Err() != nil { // Tolerant: the client left; run nothing more
		err := context.Cause(ctx)
		return failure(req.ID, codeOf(err), err)
	}
	if req.Op == OpAllToAll {
		out, err := ss.Exec.(AllToAllExecutor).AllToAll(ctx, req, data)
		if err != nil {
			return failure(req.ID, codeOf(err), err)
		}
		return &Reply{ID: req.ID, OK: true, Rank: -1, Data: out}
	}
	var info map[string]int64
	var err error
	if ie, ok := ss.Exec.(InfoExecutor); ok {
		info, err = ie.SyncInfo(ctx, req, data)
	} else {
		err = ss.Exec.Sync(ctx, req, data)
	}
	if err != nil {
		return failure(req.ID, codeOf(err), err)
	}
	rep := &Reply{ID: req.ID, OK: true, Rank: -1, Data: make([][]byte, len(req.Tensors)), Info: info}
	for i, t := range req.Tensors {
		if t.Inline {
			rep.Data[i] = data[i]
		} else {
			rep.Data[i] = []byte{}
		}
	}
	return rep
}

// check is the executor's verdict on a request: Check for a sync,
// CheckAllToAll for an alltoall (refused when the tool has none).
func (ss *session) check(req *Request, data [][]byte) error {
	if req.Op != OpAllToAll {
		return ss.Exec.Check(req)
	}
	a, ok := ss.Exec.(AllToAllExecutor)
	if !ok {
		return &RequestError{ID: req.ID, Field: "op", Err: errors.New("alltoall: this sidecar answers sync requests only")}
	}
	return a.CheckAllToAll(req, data)
}

// resolve finds every tensor's bytes: a bounded range of its segment, or
// an aligned copy of its inline bytes.
func (ss *session) resolve(req *Request) ([][]byte, error) {
	data := make([][]byte, len(req.Tensors))
	for i, t := range req.Tensors {
		if t.Inline {
			data[i] = aligned(len(t.Data))
			copy(data[i], t.Data)
			continue
		}
		s, ok := ss.segs[t.Seg]
		if !ok {
			return nil, &RequestError{ID: req.ID, Field: fmt.Sprintf("tensors[%d].seg", i), Err: fmt.Errorf("segment %d is not attached", t.Seg)}
		}
		b, err := s.Range(t.Off, t.Len)
		if err != nil {
			return nil, &RequestError{ID: req.ID, Field: fmt.Sprintf("tensors[%d].off", i), Err: fmt.Errorf("segment %d: %w", t.Seg, err)}
		}
		data[i] = b
	}
	return data, nil
}

// codeOf classifies a failure for the reply.
func codeOf(err error) string {
	var (
		re *RequestError
		rj *RejectedError
		mm *MismatchError
		pe *mesh.PeerError
	)
	switch {
	case errors.As(err, &re):
		return CodeBadRequest
	case errors.As(err, &rj):
		return CodeRejected
	case errors.As(err, &mm):
		return CodeMismatch
	case errors.As(err, &pe):
		return CodePeer
	case errors.Is(err, context.Canceled):
		return CodeShutdown
	}
	return CodeFailed
}

// aligned returns n zeroed bytes starting on an 8-byte boundary.
func aligned(n int) []byte {
	if n == 0 {
		return []byte{}
	}
	w := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), n)
}
