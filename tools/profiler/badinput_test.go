package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
)

// frames reads a stream to its end or first error, headers and ends
// included.
func frames(b []byte) ([]wire.Frame, error) {
	r := wire.NewReader(bytes.NewReader(b), wire.Limits{})
	var fs []wire.Frame
	for {
		f, err := r.NextFrame()
		if err == io.EOF {
			return fs, nil
		}
		if err != nil {
			return fs, err
		}
		fs = append(fs, f)
	}
}

// badTraceFiles returns a good trace and a truncated one.
func badTraceFiles(t *testing.T) (good, trunc string) {
	t.Helper()
	good = "testdata/synth/kineto-2024/rank0.pt.trace.json"
	b, err := os.ReadFile(good)
	require.NoError(t, err)
	trunc = filepath.Join(t.TempDir(), "trunc.json")
	require.NoError(t, os.WriteFile(trunc, b[:5000], 0o644))
	return good, trunc
}

// TestIngestFailureWritesNoEnd: ingest of a bad file (after a good one)
// exits 2 and its stream has no end frame, only an error frame saying
// why, so the next tool in the pipe fails too instead of reading a
// complete, valid stream.
func TestIngestFailureWritesNoEnd(t *testing.T) {
	good, trunc := badTraceFiles(t)
	for _, files := range [][]string{{trunc}, {good, trunc}} {
		code, out, errs := runCLI(t, nil, append([]string{"ingest"}, files...)...)
		require.Equal(t, cli.ExitBadInput, code, errs)
		fs, err := frames(out)
		require.ErrorIs(t, err, wire.ErrTruncated, "the stream of a failed ingest reads as complete")
		require.NotEmpty(t, fs)
		e, ok := fs[len(fs)-1].(*wire.Error)
		require.True(t, ok, "last frame %T, want the error frame", fs[len(fs)-1])
		assert.Equal(t, "bad_input", e.Code)
		assert.Contains(t, e.Msg, "trunc.json")
	}
}

// TestOutputFileOnlyWhole: with -o, a failing ingest, model or convert
// leaves no file (nor a temporary one) and an existing file as it was; a
// successful one writes the file whole.
func TestOutputFileOnlyWhole(t *testing.T) {
	good, trunc := badTraceFiles(t)
	dir := t.TempDir()
	for _, verb := range []string{"ingest", "model", "convert"} {
		t.Run(verb, func(t *testing.T) {
			fresh := filepath.Join(dir, verb+".out")
			code, out, errs := runCLI(t, nil, verb, "-o", fresh, good, trunc)
			require.Equal(t, cli.ExitBadInput, code, errs)
			assert.Empty(t, out)
			assert.NoFileExists(t, fresh)

			kept := filepath.Join(dir, verb+".kept")
			require.NoError(t, os.WriteFile(kept, []byte("previous run"), 0o644))
			code, _, errs = runCLI(t, nil, verb, "-o", kept, good, trunc)
			require.Equal(t, cli.ExitBadInput, code, errs)
			b, err := os.ReadFile(kept)
			require.NoError(t, err)
			assert.Equal(t, "previous run", string(b))

			code, _, errs = runCLI(t, nil, verb, "-o", kept, good)
			require.Equal(t, 0, code, errs)
			b, err = os.ReadFile(kept)
			require.NoError(t, err)
			if verb == "convert" {
				assert.True(t, bytes.HasSuffix(b, []byte("]}\n")))
			} else {
				_, err := frames(b)
				require.NoError(t, err)
			}
			st, err := os.Stat(kept)
			require.NoError(t, err)
			assert.Equal(t, os.FileMode(0o644)&^umask(t), st.Mode().Perm()&^umask(t))
		})
	}
	left, err := filepath.Glob(filepath.Join(dir, ".*"))
	require.NoError(t, err)
	assert.Empty(t, left, "temporary files left behind")
}

func umask(t *testing.T) os.FileMode {
	t.Helper()
	f := filepath.Join(t.TempDir(), "m")
	require.NoError(t, os.WriteFile(f, nil, 0o777))
	st, err := os.Stat(f)
	require.NoError(t, err)
	return 0o777 &^ st.Mode().Perm()
}

// A legacy trace without its parameter list (no NAME.meta.json beside it,
// no --params, no Input Dims) gives gradients without sizes: profiler
// model says so and how to fix it, exit 2, and writes no model (fuser plan
// used to fail later with "bytes 0 must be positive"). With the sidecar
// beside it, the same trace gives a model.
func TestModelWithoutSizesFails(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile("testdata/ddp-gloo-2/rank-0.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rank-0.json"), b, 0o644))
	out := filepath.Join(dir, "model.tw")
	code, _, stderr := runCLI(t, nil, "model", "--quiet", "-o", out, dir)
	assert.Equal(t, cli.ExitBadInput, code)
	assert.Contains(t, stderr, "gradients have no size")
	assert.Contains(t, stderr, "--params")
	assert.NoFileExists(t, out)
	meta, err := os.ReadFile("testdata/ddp-gloo-2/rank-0.meta.json")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rank-0.meta.json"), meta, 0o644))
	code, _, stderr = runCLI(t, nil, "model", "--quiet", "-o", out, dir)
	require.Equal(t, 0, code, stderr)
	assert.FileExists(t, out)
}
