package wire

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readFrames reads every frame of b, headers and ends included, until the
// first error or io.EOF.
func readFrames(b []byte) ([]Frame, error) {
	r := NewReader(bytes.NewReader(b), Limits{})
	var fs []Frame
	for {
		f, err := r.NextFrame()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return fs, err
		}
		fs = append(fs, f)
	}
}

// TestAbortWritesNoEnd: a producer that fails ends its stream with Abort:
// the frames written and an error frame come through, no end frame does,
// and the reader says the stream is truncated. Close after Abort (a
// deferred one) adds nothing.
func TestAbortWritesNoEnd(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, "test")
	require.NoError(t, w.Write(&Dense{Name: "a", Rank: -1, DType: F32, Shape: []int64{1}, Data: f32le(1)}))
	require.NoError(t, w.Abort(&Error{Code: "bad_input", Msg: "trace.json: input ends inside an array at byte 18", Rank: -1, Frame: -1}))
	n := buf.Len()
	require.NoError(t, w.Close())
	require.Equal(t, n, buf.Len(), "Close after Abort wrote")
	require.NoError(t, w.Abort(nil))
	fs, err := readFrames(buf.Bytes())
	require.ErrorIs(t, err, ErrTruncated)
	require.Len(t, fs, 3)
	assert.IsType(t, &Header{}, fs[0])
	assert.IsType(t, &Dense{}, fs[1])
	require.IsType(t, &Error{}, fs[2])
	assert.Equal(t, "bad_input", fs[2].(*Error).Code)

	// Nothing written and no reason: nothing at all (an empty input is
	// truncated too).
	buf.Reset()
	w = NewWriter(&buf, "test")
	require.NoError(t, w.Abort(nil))
	require.NoError(t, w.Close())
	assert.Zero(t, buf.Len())
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	if f.n -= len(p); f.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

// TestCloseAfterFailedWriteWritesNoEnd: once a write failed (frames are
// missing), Close returns that error and writes no end frame.
func TestCloseAfterFailedWriteWritesNoEnd(t *testing.T) {
	fw := &failWriter{n: 1 << 20}
	var buf bytes.Buffer
	w := NewWriter(io.MultiWriter(fw, &buf), "test")
	big := &Dense{Name: "big", Rank: -1, DType: U8, Shape: []int64{2 << 20}, Data: make([]byte, 2<<20)}
	require.Error(t, w.Write(big))
	require.ErrorContains(t, w.Close(), "disk full")
	_, err := readFrames(buf.Bytes())
	require.Error(t, err)
	assert.NotContains(t, buf.String(), "\xa1t\xa3end")
}
