package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCreateAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.bin")
	require.NoError(t, os.WriteFile(path, []byte("old"), 0o644))
	names := func() []string {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}

	// Aborted: the path keeps what it held, no temporary file is left.
	f, err := CreateAtomic(path)
	require.NoError(t, err)
	_, err = f.WriteString("half")
	require.NoError(t, err)
	require.Len(t, names(), 2, "the temporary file lies beside the path")
	f.Abort()
	f.Abort()
	require.Equal(t, []string{"state.bin"}, names())
	got, _ := os.ReadFile(path)
	require.Equal(t, "old", string(got))

	// Committed: the path holds the new content; Abort after it is a no-op.
	f, err = CreateAtomic(path)
	require.NoError(t, err)
	_, err = f.WriteString("new")
	require.NoError(t, err)
	require.NoError(t, f.Commit())
	f.Abort()
	require.Equal(t, []string{"state.bin"}, names())
	got, _ = os.ReadFile(path)
	require.Equal(t, "new", string(got))
	require.Error(t, f.Commit())

	// A directory that does not exist: an error naming the path.
	_, err = CreateAtomic(filepath.Join(dir, "no", "such"))
	require.ErrorContains(t, err, filepath.Join(dir, "no", "such"))
}
