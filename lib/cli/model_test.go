package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

func TestReadModel(t *testing.T) {
	dir := t.TempDir()
	js := filepath.Join(dir, "m.json")
	require.NoError(t, os.WriteFile(js, []byte(`{"name":"toy","forward_ns":5,"grads":[{"name":"w","bytes":8,"dtype":"f32","ready_ns":1,"compute_ns":2}],"comm":[{"op":"allreduce","bytes":8,"ns":3,"world":2}]}`), 0o644))
	m, err := ReadModel(js, nil, wire.Limits{})
	require.NoError(t, err)
	require.Equal(t, "toy", m.Name)
	require.Equal(t, int64(5), m.ForwardNS)
	require.Equal(t, []wire.Grad{{Name: "w", Bytes: 8, DType: "f32", ReadyNS: 1, ComputeNS: 2}}, m.Grads)
	require.Equal(t, []wire.CommSample{{Op: "allreduce", Bytes: 8, NS: 3, World: 2}}, m.Comm)

	// the same model as a stream on stdin
	var buf bytes.Buffer
	w := wire.NewWriter(&buf, "test")
	require.NoError(t, w.Write(m))
	require.NoError(t, w.Close())
	got, err := ReadModel("-", &buf, wire.Limits{})
	require.NoError(t, err)
	require.Equal(t, m.Grads, got.Grads)

	// a stream without a model frame, and broken JSON: exit 2, named
	buf.Reset()
	w = wire.NewWriter(&buf, "test")
	require.NoError(t, w.Close())
	_, err = ReadModel("-", &buf, wire.Limits{})
	require.Error(t, err)
	require.Equal(t, ExitBadInput, ExitCodeOf(err))
	require.Contains(t, err.Error(), "stdin: no model frame")

	// a JSON model on stdin, or in a file not named .json, is read as
	// JSON (no stream starts with '{' or white space)
	for _, in := range []string{`{"name":"piped","grads":[{"name":"w","bytes":8}]}`, "\n  {\"name\": \"piped\"}"} {
		got, err = ReadModel("-", strings.NewReader(in), wire.Limits{})
		require.NoError(t, err)
		require.Equal(t, "piped", got.Name)
	}
	noext := filepath.Join(dir, "model")
	require.NoError(t, os.WriteFile(noext, []byte(`{"name":"noext"}`), 0o644))
	got, err = ReadModel(noext, nil, wire.Limits{})
	require.NoError(t, err)
	require.Equal(t, "noext", got.Name)
	_, err = ReadModel("-", strings.NewReader(`{"grads": [`), wire.Limits{})
	require.Equal(t, ExitBadInput, ExitCodeOf(err))
	require.True(t, strings.HasPrefix(err.Error(), "stdin:"), err.Error())

	bad := filepath.Join(dir, "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(`{"grads": [`), 0o644))
	_, err = ReadModel(bad, nil, wire.Limits{})
	require.Equal(t, ExitBadInput, ExitCodeOf(err))
	require.True(t, strings.HasPrefix(err.Error(), bad+":"), err.Error())
}
