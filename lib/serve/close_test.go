package serve

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// abortJob is a world of one that records Abort.
type abortJob struct {
	soloJob
	aborted chan error
}

func (j abortJob) Abort(err error) { j.aborted <- err }

// A client that closes as soon as it has read its last reply leaves
// nothing pending: the job is not aborted. (The server used to count the
// request pending until after the reply was written; a client quick to
// close then aborted the whole job "with 1 request(s) pending":
// TestServeUnderMpirun's flake.)
func TestServerCloseRightAfterReply(t *testing.T) {
	for n := range 200 {
		path := filepath.Join(t.TempDir(), "s.sock")
		ln, err := Listen(path)
		require.NoError(t, err)
		job := abortJob{soloJob{make(chan struct{})}, make(chan error, 1)}
		srv := &Server{Exec: doubler{}, Job: job}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(context.Background(), ln) }()
		c, err := Dial(path)
		require.NoError(t, err)
		_, err = c.Do(&Request{Op: OpSync, Tensors: []Tensor{{Name: "a", DType: wire.F32, Shape: []int64{1}, Inline: true, Data: f32s(1)}}})
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.ErrorIs(t, waitErr(t, done), ErrClientGone)
		select {
		case err := <-job.aborted:
			t.Fatalf("run %d: the job was aborted: %v", n, err)
		default:
		}
	}
}

// failJob is a world of one that a test fails from outside.
type failJob struct {
	ch  chan struct{}
	err atomic.Pointer[error]
}

func (j *failJob) Aborted() <-chan struct{} { return j.ch }
func (j *failJob) Err() error {
	if p := j.err.Load(); p != nil {
		return *p
	}
	return nil
}
func (j *failJob) Abort(err error) {
	if j.err.CompareAndSwap(nil, &err) {
		close(j.ch)
	}
}

// Requests the client sent before the job failed are all answered with
// the failure, including those still in the socket when the server
// noticed it: none finds the connection closed on it. (The server used
// to fail only the requests it had queued and close on the rest:
// TestServeDeadOrSilentRank's flake, a rank's client got "closed".)
func TestServerFailsEveryRequestSentBeforeAbort(t *testing.T) {
	for n := range 25 {
		path := filepath.Join(t.TempDir(), "s.sock")
		ln, err := Listen(path)
		require.NoError(t, err)
		job := &failJob{ch: make(chan struct{})}
		srv := &Server{Exec: doubler{}, Job: job}
		done := make(chan error, 1)
		go func() { done <- srv.Serve(context.Background(), ln) }()
		c, err := Dial(path)
		require.NoError(t, err)
		_, err = c.Do(&Request{Op: OpPing})
		require.NoError(t, err)
		var chs []<-chan *Reply
		for range 4 {
			_, ch, err := c.Go(&Request{Op: OpSync, Tensors: []Tensor{{Name: "a", DType: wire.F32, Shape: []int64{1}, Inline: true, Data: f32s(1)}}}, -1)
			require.NoError(t, err)
			chs = append(chs, ch)
		}
		job.Abort(errors.New("rank 2 died"))
		for i, ch := range chs {
			select {
			case r := <-ch:
				if !r.OK {
					require.Equal(t, CodePeer, r.Code, "run %d request %d: %s", n, i, r.Error)
					require.Contains(t, r.Error, "rank 2 died", "run %d request %d", n, i)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("run %d: request %d unanswered", n, i)
			}
		}
		require.EqualError(t, waitErr(t, done), "rank 2 died")
		c.Close()
	}
}
