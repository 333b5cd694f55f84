package serve

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// reverser is a world of one that answers alltoall requests: each pair's
// split sizes and its rows reversed byte by byte (so the test sees the
// executor's data, not the request's, come back).
type reverser struct{ doubler }

func (reverser) CheckAllToAll(req *Request, data [][]byte) error {
	if len(req.Tensors)%2 != 0 {
		return &RequestError{ID: req.ID, Field: "tensors", Err: errors.New("pairs")}
	}
	return nil
}

func (reverser) AllToAll(_ context.Context, _ *Request, data [][]byte) ([][]byte, error) {
	out := make([][]byte, len(data))
	for i, d := range data {
		out[i] = make([]byte, len(d)+1) // results need not be the request's size
		for k, b := range d {
			out[i][len(d)-1-k] = b
		}
	}
	return out, nil
}

func serveWith(t *testing.T, ex Executor) *Client {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(path)
	require.NoError(t, err)
	srv := &Server{Exec: ex, Job: soloJob{make(chan struct{})}}
	go func() { _ = srv.Serve(context.Background(), ln) }()
	c, err := Dial(path)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// An alltoall request round-trips; its reply carries the executor's data
// inline (sizes of its own); a tool without alltoall refuses it naming
// op; an odd number of tensors is the executor's refusal.
func TestAllToAllRequest(t *testing.T) {
	req := &Request{ID: 9, Op: OpAllToAll, Step: 2, Tensors: []Tensor{
		{Name: "x.splits", DType: wire.I64, Shape: []int64{1}, Inline: true, Data: []byte{1, 0, 0, 0, 0, 0, 0, 0}},
		{Name: "x", DType: wire.F32, Shape: []int64{1}, Inline: true, Data: []byte{1, 2, 3, 4}},
	}}
	got, err := DecodeRequest(AppendRequest(nil, req), Limits{})
	require.NoError(t, err)
	require.Equal(t, req, got)

	c := serveWith(t, reverser{})
	r, err := c.Do(&Request{Op: OpAllToAll, Step: 2, Tensors: req.Tensors})
	require.NoError(t, err)
	require.True(t, r.OK, r.Error)
	require.Equal(t, [][]byte{{0, 0, 0, 0, 0, 0, 0, 1, 0}, {4, 3, 2, 1, 0}}, r.Data)
	r, err = c.Do(&Request{Op: OpAllToAll, Tensors: req.Tensors[:1]})
	require.Error(t, err)
	require.Equal(t, "tensors", r.Field)

	c = serveWith(t, doubler{})
	r, err = c.Do(&Request{Op: OpAllToAll, Tensors: req.Tensors})
	require.Error(t, err)
	require.Equal(t, CodeBadRequest, r.Code)
	require.Equal(t, "op", r.Field)
	require.Contains(t, r.Error, "sync requests only")
}

// A sync and an alltoall in the same place of the sequence disagree.
func TestVerdictAllToAllDiffersFromSync(t *testing.T) {
	a := Verdict{Step: 1, Tensors: 2, Bytes: AllToAllBytes}
	require.Equal(t, a, decodeVerdict(encodeVerdict(a)))
	require.NotEqual(t, a, Verdict{Step: 1, Tensors: 2, Bytes: 16})
	require.Equal(t, "step 1, an alltoall of 2 tensors", a.String())
}
