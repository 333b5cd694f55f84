package serve

import (
	"context"
	"path/filepath"
	"testing"

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
