package serve

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/shm"
	"trainwire.dev/lib/wire"
)

// doubler is a world of one whose "collective" doubles every f32.
type doubler struct{}

func (doubler) Check(req *Request) error {
	for i, t := range req.Tensors {
		if t.DType != wire.F32 {
			return &RequestError{ID: req.ID, Field: "tensors[" + string(rune('0'+i)) + "].dtype", Err: errors.New("f32 only")}
		}
	}
	return nil
}

func (doubler) Sync(_ context.Context, _ *Request, data [][]byte) error {
	for _, d := range data {
		for k := 0; k+4 <= len(d); k += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(d[k:]))
			binary.LittleEndian.PutUint32(d[k:], math.Float32bits(2*v))
		}
	}
	return nil
}

type soloJob struct{ ch chan struct{} }

func (j soloJob) Aborted() <-chan struct{} { return j.ch }
func (soloJob) Err() error                 { return nil }
func (soloJob) Abort(error)                {}

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for k, x := range v {
		binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(x))
	}
	return b
}

// startServer serves one client on a socket in a fresh directory and
// returns the client and Serve's result.
func startServer(t *testing.T) (*Client, <-chan error) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := Listen(path)
	require.NoError(t, err)
	srv := &Server{Exec: doubler{}, Job: soloJob{make(chan struct{})}}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(context.Background(), ln) }()
	c, err := Dial(path)
	require.NoError(t, err)
	return c, done
}

func TestServerSharedMemoryAndInline(t *testing.T) {
	c, done := startServer(t)
	seg, err := shm.Create("t", 4096, true)
	require.NoError(t, err)
	defer seg.Close()
	copy(seg.Bytes()[64:], f32s(1, 2, 3))
	size, err := c.Attach(seg, 1)
	require.NoError(t, err)
	require.Equal(t, int64(4096), size)
	r, err := c.Do(&Request{Op: OpSync, Step: 1, Tensors: []Tensor{
		{Name: "a", DType: wire.F32, Shape: []int64{3}, Seg: 1, Off: 64, Len: 12},
		{Name: "b", DType: wire.F32, Shape: []int64{2}, Inline: true, Data: f32s(5, 6)},
	}})
	require.NoError(t, err)
	require.Equal(t, f32s(2, 4, 6), seg.Bytes()[64:76], "in place in the segment")
	require.Equal(t, [][]byte{{}, f32s(10, 12)}, r.Data)
	_, err = c.Do(&Request{Op: OpPing})
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.ErrorIs(t, waitErr(t, done), ErrClientGone)
}

// A malformed request gets an error naming its id and field, and the
// sidecar keeps serving; a range outside the segment is refused.
func TestServerMalformedKeepsServing(t *testing.T) {
	c, done := startServer(t)
	seg, err := shm.Create("t", 256, false)
	require.NoError(t, err)
	defer seg.Close()
	_, err = c.Attach(seg, 0)
	require.NoError(t, err)
	bad := rawMap(s("id"), i(100), s("op"), s("sync"), s("step"), s("x"))
	ch := c.Expect(100)
	require.NoError(t, c.SendRaw(bad))
	r := <-ch
	require.False(t, r.OK)
	require.Equal(t, CodeBadRequest, r.Code)
	require.Equal(t, "step", r.Field)
	require.Contains(t, r.Error, "request 100")

	_, err = c.Do(&Request{Op: OpSync, Tensors: []Tensor{{Name: "a", DType: wire.F32, Shape: []int64{64}, Seg: 0, Off: 4, Len: 256}}})
	var re *ReplyError
	require.ErrorAs(t, err, &re)
	require.Equal(t, "tensors[0].off", re.Field)
	require.Contains(t, re.Msg, "outside the segment of 256 bytes")

	_, err = c.Do(&Request{Op: OpSync, Tensors: []Tensor{{Name: "a", DType: wire.F32, Shape: []int64{1}, Inline: true, Data: f32s(1)}}})
	require.NoError(t, err, "still serving")
	require.NoError(t, c.Close())
	require.ErrorIs(t, waitErr(t, done), ErrClientGone)
}

// A message longer than the limit breaks the framing: the client is closed.
func TestServerBrokenFramingClosesClient(t *testing.T) {
	c, done := startServer(t)
	_ = c.conn.WriteMessage(make([]byte, DefaultLimits.MaxMessage+1)) // the sidecar may close before it is all written
	var fe *FrameError
	require.ErrorAs(t, waitErr(t, done), &fe)
	_, err := c.Do(&Request{Op: OpPing})
	require.Error(t, err)
}

func TestListenRefuses(t *testing.T) {
	_, err := Listen("@abstract")
	require.ErrorContains(t, err, "abstract")
	_, err = Listen("/tmp/trainwire-test.sock")
	require.ErrorContains(t, err, "writable by group or others")
}

func waitErr(t *testing.T, ch <-chan error) error {
	select {
	case err := <-ch:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("Serve did not return")
		return nil
	}
}
