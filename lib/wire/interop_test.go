package wire

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// python returns a command running the Python client's CLI
// (clients/python/trainwire/wire.py) under Debian's python3, or skips the
// test when that interpreter or its packages are missing — unless
// TRAINWIRE_REQUIRE_PYTHON=1 (make test sets it), where that is a failure.
func python(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	const py = "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import msgpack, numpy, xxhash").Run(); err != nil {
		if os.Getenv("TRAINWIRE_REQUIRE_PYTHON") == "1" {
			t.Fatalf("%s with msgpack, numpy and xxhash is required: %v", py, err)
		}
		t.Skipf("%s with msgpack, numpy and xxhash not available: %v", py, err)
	}
	_, file, _, _ := runtime.Caller(0)
	client := filepath.Join(filepath.Dir(file), "..", "..", "clients", "python")
	cmd := exec.Command(py, append([]string{"-m", "trainwire.wire"}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONPATH="+client)
	return cmd
}

func TestInteropPythonWritesGoReads(t *testing.T) {
	cmd := python(t, "sample")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	py, err := cmd.Output()
	require.NoError(t, err, stderr.String())

	// Go reads every frame strictly, and every data type is there.
	r := NewReader(bytes.NewReader(py), Limits{})
	frames, err := readAll(r)
	require.NoError(t, err)
	types := map[string]bool{}
	for _, f := range frames {
		types[f.Type()] = true
	}
	for _, typ := range []string{TypeDense, TypeSparse, TypeCompressed, TypeEvent, TypeModel,
		TypePlan, TypeChunk, TypeStats, TypeError} {
		assert.True(t, types[typ], "python sample has no %s frame", typ)
	}
	assert.True(t, bytes.Contains(py, []byte("\xa8step_end")), "python sample has no step_end frame")
	// Go writes them back byte for byte.
	again, err := recode(t, py)
	require.NoError(t, err)
	assert.Equal(t, py, again, "Go's re-encoding of Python's stream differs")
}

func TestInteropGoWritesPythonReads(t *testing.T) {
	gob := append(encodeStream(t, sampleFrames()...), encodeStream(t, sampleFrames()[:3]...)...)
	gob = append(gob, stepStream(t)...)
	cmd := python(t, "roundtrip")
	cmd.Stdin = bytes.NewReader(gob)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	assert.Equal(t, gob, out, "Python's re-encoding of Go's stream differs")
}

func TestInteropPythonRejectsTruncated(t *testing.T) {
	gob := encodeStream(t, sampleFrames()...)
	cmd := python(t, "roundtrip")
	cmd.Stdin = bytes.NewReader(gob[:len(gob)-7])
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.ExitCode(), stderr.String())
	assert.Contains(t, stderr.String(), "frame")
}
