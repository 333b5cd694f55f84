package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// TestEncodeOutputAtomic: encode -o writes its file only once every frame
// is encoded; a run that fails mid-way (frame 2 holds a NaN) leaves no
// file cut mid-frame, keeps what the path held, and leaves no temporary
// file (issue 24 item 3).
func TestEncodeOutputAtomic(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "enc.tw")
	good := stream(t, dense("a", 0, gauss(1000, 1)), dense("b", 0, gauss(1000, 2)))
	_, errs, code := runIn(t, good, "encode", "--algo", "topk", "-o", out)
	require.Equal(t, 0, code, errs)
	before, err := os.ReadFile(out)
	require.NoError(t, err)
	require.NotEmpty(t, frames(t, before))
	bad := gauss(1000, 3)
	bad[7] = float32(math.NaN())
	_, errs, code = runIn(t, stream(t, dense("a", 1, gauss(1000, 4)), dense("b", 1, bad)), "encode", "--algo", "topk", "-o", out)
	assert.Equal(t, 2, code, errs)
	after, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, before, after, "a failed encode must leave the old file as it was")
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no temporary file left behind")
	_, _, code = runIn(t, stream(t, dense("b", 1, bad)), "encode", "--algo", "topk", "-o", filepath.Join(dir, "new.tw"))
	assert.Equal(t, 2, code)
	assert.NoFileExists(t, filepath.Join(dir, "new.tw"))
}

// TestEncodeRefusesSparse: a sparse frame (what hashsync gen writes) is
// refused with exit 2 and a message saying why, not passed through
// uncompressed as if encode had done its work; the stream on stdout ends
// with an error frame, never an end frame (issue 24 item 3).
func TestEncodeRefusesSparse(t *testing.T) {
	sp := &wire.Sparse{Name: "emb", DType: wire.F32, Shape: []int64{100, 4}, Width: 4, Format: wire.COO,
		IType: wire.U32, Nnz: 2, Indices: make([]byte, 8), Values: make([]byte, 2*4*4)}
	sp.Indices[4] = 9
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	require.NoError(t, w.Write(sp))
	require.NoError(t, w.Close())
	stdout, errs, code := runIn(t, b.Bytes(), "encode", "--algo", "topk")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `tensor "emb" (step 0) is a sparse frame`)
	r := wire.NewReader(bytes.NewReader(stdout), wire.Limits{})
	var last wire.Frame
	for {
		f, err := r.Next()
		if err != nil {
			break
		}
		last = f
	}
	_, isErr := last.(*wire.Error)
	assert.True(t, isErr, "the output stream ends with an error frame, got %T", last)
}
