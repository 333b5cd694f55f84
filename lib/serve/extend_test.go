package serve

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// A tool's own bool options round-trip; options it does not declare are
// refused, naming the option and the known ones.
func TestRequestToolOptions(t *testing.T) {
	lim := Limits{Options: []string{"contribute"}}
	want := sampleRequest()
	want.Opts = map[string]bool{"contribute": false}
	got, err := DecodeRequest(AppendRequest(nil, want), lim)
	require.NoError(t, err)
	require.Equal(t, want, got)

	_, err = DecodeRequest(AppendRequest(nil, want), Limits{})
	var re *RequestError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "opts.contribute", re.Field)
	require.Equal(t, int64(7), re.ID)
	require.Contains(t, re.Error(), "known: average)")
	_, err = DecodeRequest(AppendRequest(nil, &Request{ID: 8, Op: OpSync, Opts: map[string]bool{"x": true}}), lim)
	require.ErrorAs(t, err, &re)
	require.Contains(t, re.Error(), "known: average, contribute)")
}

// A reply's info map round-trips, in key order; a reply without info keeps
// the 8 keys of the golden bytes.
func TestReplyInfo(t *testing.T) {
	want := &Reply{ID: 4, OK: true, Rank: -1, Data: [][]byte{{}}, Info: map[string]int64{"round": 9, "contributors": 3}}
	b := AppendReply(nil, want)
	require.Equal(t, byte(0x89), b[0])
	got, err := DecodeReply(b)
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Contains(t, string(b), "info\x82\xaccontributors\x03\xa5round\x09")
}

// infoExec answers with info, and blocks (until its context ends) on a
// request for step 99.
type infoExec struct {
	doubler
	cancelled chan error
}

func (e infoExec) SyncInfo(ctx context.Context, req *Request, data [][]byte) (map[string]int64, error) {
	if req.Step == 99 {
		<-ctx.Done()
		e.cancelled <- context.Cause(ctx)
		return nil, context.Cause(ctx)
	}
	return map[string]int64{"step": req.Step}, e.Sync(ctx, req, data)
}

// A tolerant server: replies carry the executor's info; a client that
// leaves with a request pending cancels that request's context (cause
// ErrClientGone) instead of aborting the job, and Serve returns
// ErrClientGone.
func TestServerTolerantClientLeaves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(path)
	require.NoError(t, err)
	ex := infoExec{cancelled: make(chan error, 1)}
	job := abortJob{soloJob{make(chan struct{})}, make(chan error, 1)}
	srv := &Server{Exec: ex, Job: job, Tolerant: true}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	c, err := Dial(path)
	require.NoError(t, err)
	r, err := c.Do(&Request{Op: OpSync, Step: 5, Tensors: []Tensor{{Name: "a", DType: wire.F32, Shape: []int64{1}, Inline: true, Data: f32s(2)}}})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"step": 5}, r.Info)
	require.Equal(t, [][]byte{f32s(4)}, r.Data)
	_, _, err = c.Go(&Request{Op: OpSync, Step: 99}, -1)
	require.NoError(t, err)
	_, err = c.Do(&Request{Op: OpPing}) // the sync has surely been read
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.ErrorIs(t, waitErr(t, done), ErrClientGone)
	select { // the sync may have been dropped before it ran
	case err := <-ex.cancelled:
		require.ErrorIs(t, err, ErrClientGone)
	default:
	}
	select {
	case err := <-job.aborted:
		t.Fatalf("the job was aborted: %v", err)
	default:
	}
}
