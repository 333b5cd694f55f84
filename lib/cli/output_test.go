package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// TestOutputAppearsWhole: a file output exists under its name only after
// Commit; Close without Commit removes the temporary file and leaves an
// existing file alone; stdout and non-regular files are written in place.
func TestOutputAppearsWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.tw")
	o, err := CreateOutput(path, nil)
	require.NoError(t, err)
	_, err = o.Write([]byte("half a frame"))
	require.NoError(t, err)
	assert.NoFileExists(t, path)
	require.NoError(t, o.Close())
	assert.NoFileExists(t, path)
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, ents, "temporary file left behind")

	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	o, err = CreateOutput(path, nil)
	require.NoError(t, err)
	_, _ = o.Write([]byte("new"))
	b, _ := os.ReadFile(path)
	assert.Equal(t, "old", string(b))
	require.NoError(t, o.Commit())
	require.NoError(t, o.Close())
	b, _ = os.ReadFile(path)
	assert.Equal(t, "new", string(b))
	assert.Equal(t, path, o.Name())

	var stdout bytes.Buffer
	o, err = CreateOutput("-", &stdout)
	require.NoError(t, err)
	_, _ = o.Write([]byte("x"))
	require.NoError(t, o.Close())
	assert.Equal(t, "x", stdout.String())
	assert.Equal(t, "stdout", o.Name())

	o, err = CreateOutput(os.DevNull, nil)
	require.NoError(t, err)
	_, err = o.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, o.Commit())
	st, err := os.Stat(os.DevNull)
	require.NoError(t, err)
	assert.False(t, st.Mode().IsRegular(), "/dev/null was replaced")

	_, err = CreateOutput(dir, nil)
	assert.ErrorContains(t, err, "is a directory")

	// a symbolic link keeps pointing at the new file
	link := filepath.Join(dir, "link.tw")
	require.NoError(t, os.Symlink(path, link))
	o, err = CreateOutput(link, nil)
	require.NoError(t, err)
	_, _ = o.Write([]byte("via link"))
	require.NoError(t, o.Commit())
	assert.Equal(t, link, o.Name())
	st, err = os.Lstat(link)
	require.NoError(t, err)
	assert.Equal(t, os.ModeSymlink, st.Mode().Type())
	b, _ = os.ReadFile(path)
	assert.Equal(t, "via link", string(b))
}

// TestEndStream: success ends the stream; failure writes an error frame
// with the exit code's name and no end frame.
func TestEndStream(t *testing.T) {
	var buf bytes.Buffer
	w := wire.NewWriter(&buf, "t")
	require.NoError(t, EndStream(w, nil))
	_, err := wire.NewReader(bytes.NewReader(buf.Bytes()), wire.Limits{}).Next()
	assert.Equal(t, io.EOF, err)

	for _, c := range []struct {
		err  error
		code string
	}{
		{WithCode(ExitBadInput, errors.New("bad")), "bad_input"},
		{fmt.Errorf("stopped: %w", context.Canceled), "interrupted"},
		{errors.New("disk"), "failed"},
	} {
		buf.Reset()
		w = wire.NewWriter(&buf, "t")
		require.Equal(t, c.err, EndStream(w, c.err))
		r := wire.NewReader(bytes.NewReader(buf.Bytes()), wire.Limits{})
		f, err := r.Next()
		require.NoError(t, err)
		require.Equal(t, c.code, f.(*wire.Error).Code)
		_, err = r.Next()
		require.ErrorIs(t, err, wire.ErrTruncated)
	}
}
