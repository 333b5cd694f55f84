package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
)

// genFiles writes one gen stream per rank into dir and returns the paths.
func genFiles(t *testing.T, dir string, world int, args ...string) []string {
	t.Helper()
	bin := clitest.Binary(t, "hashsync")
	files := make([]string, world)
	for r := range world {
		files[r] = filepath.Join(dir, fmt.Sprintf("rank%d.tw", r))
		a := append([]string{"gen", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world)}, args...)
		out, err := exec.Command(bin, a...).Output()
		require.NoError(t, err, "gen %v", a)
		require.NoError(t, os.WriteFile(files[r], out, 0o644))
	}
	return files
}

// proc is one rank of hashsync sync, a real process.
type proc = clitest.Proc

// syncRanks starts world sync processes, rank r reading stdin(r).
func syncRanks(t *testing.T, ctx context.Context, world int, stdin func(r int) io.Reader, args ...string) []*proc {
	t.Helper()
	bin := clitest.Binary(t, "hashsync")
	return syncRanksWith(t, ctx, world, func(int) (string, []string) { return bin, nil }, stdin, args...)
}

// syncRanksWith is syncRanks with rank r running binary and extra flags
// of its own: rankCmd(r).
func syncRanksWith(t *testing.T, ctx context.Context, world int, rankCmd func(r int) (string, []string), stdin func(r int) io.Reader, args ...string) []*proc {
	t.Helper()
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	ps := make([]*proc, world)
	for r := range world {
		bin, extra := rankCmd(r)
		var in io.Reader
		if stdin != nil {
			in = stdin(r)
		}
		ps[r] = clitest.Start(t, ctx, bin, nil, in, append(append([]string{"sync", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--master", master, "--timeout", "20s"}, args...), extra...)...)
	}
	return ps
}

// frames decodes a stream's data frames.
func frames(t *testing.T, b []byte) []wire.Frame {
	t.Helper()
	rd := wire.NewReader(bytes.NewReader(b), wire.Limits{})
	var out []wire.Frame
	for {
		f, err := rd.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, f)
	}
}

// sameTensors compares two streams' tensors bit for bit (names, shapes,
// row indices, values), ignoring the rank field.
func sameTensors(t *testing.T, want, got []wire.Frame, what string) {
	t.Helper()
	require.Equal(t, len(want), len(got), "%s: frames", what)
	for i := range want {
		if w, ok := want[i].(*wire.Sparse); ok {
			if g, ok := got[i].(*wire.Dense); ok {
				// A dense result of sparse input: compare with the
				// reference scattered densely.
				tt, _, err := toTensor(w, 0)
				require.NoError(t, err)
				wd := toFrame(tt, form{dense: true, shape: g.Shape}, -1).(*wire.Dense)
				assert.Equal(t, w.Name, g.Name)
				assert.True(t, bytes.Equal(wd.Data, g.Data), "%s: frame %d data differ", what, i)
				continue
			}
		}
		switch w := want[i].(type) {
		case *wire.Sparse:
			g, ok := got[i].(*wire.Sparse)
			require.True(t, ok, "%s: frame %d is %s", what, i, got[i].Type())
			assert.Equal(t, w.Name, g.Name)
			assert.Equal(t, w.Shape, g.Shape)
			assert.Equal(t, w.Width, g.Width)
			assert.Equal(t, w.Nnz, g.Nnz, "%s: frame %d rows", what, i)
			assert.True(t, bytes.Equal(w.Indices, g.Indices), "%s: frame %d indices differ", what, i)
			assert.True(t, bytes.Equal(w.Values, g.Values), "%s: frame %d values differ", what, i)
		case *wire.Dense:
			g, ok := got[i].(*wire.Dense)
			require.True(t, ok, "%s: frame %d is %s", what, i, got[i].Type())
			assert.Equal(t, w.Name, g.Name)
			assert.Equal(t, w.Shape, g.Shape)
			assert.True(t, bytes.Equal(w.Data, g.Data), "%s: frame %d data differ", what, i)
		}
	}
}

func fileReader(t *testing.T, path string) io.Reader {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return bytes.NewReader(b)
}

// R1/R12 end to end: 4 real processes per scheme; every rank's output
// equals `hashsync ref` of the inputs bit for bit. Rank-ordered schemes
// get normal values; those that sum in another order (ring, tree,
// intra-node first) get exact values.
func TestSyncEveryScheme(t *testing.T) {
	bin := clitest.Binary(t, "hashsync")
	dir := t.TempDir()
	const world = 4
	common := []string{"--model", "zipf", "--rows", "20000", "--width", "4", "--density", "0.03", "--skew", "1.1", "--steps", "2", "--tensors", "2", "--seed", "5"}
	normal := genFiles(t, filepath.Join(dir), world, common...)
	exactDir := filepath.Join(dir, "exact")
	require.NoError(t, os.Mkdir(exactDir, 0o755))
	exact := genFiles(t, exactDir, world, append(common, "--exact")...)
	denseDir := filepath.Join(dir, "dense")
	require.NoError(t, os.Mkdir(denseDir, 0o755))
	dense := genFiles(t, denseDir, world, "--model", "bernoulli", "--rows", "3000", "--width", "1", "--density", "0.05", "--overlap", "0.3", "--steps", "2", "--format", "dense")
	refOf := func(files []string, extra ...string) []wire.Frame {
		out, err := exec.Command(bin, append(append([]string{"ref"}, extra...), files...)...).Output()
		require.NoError(t, err)
		return frames(t, out)
	}
	refs := map[string][]wire.Frame{"normal": refOf(normal), "exact": refOf(exact), "dense": refOf(dense), "avg": refOf(normal, "--average"),
		"avgdense": refOf(dense, "--average", "--row-width", "1")}
	inputs := map[string][]string{"normal": normal, "exact": exact, "dense": dense, "avg": normal, "avgdense": dense}
	for _, c := range []struct {
		data   string
		scheme string
		args   []string
	}{
		{"normal", "zen", nil},
		{"normal", "zen", []string{"--partitioner", "hash", "--pull", "bitmap"}},                             // Algorithm 1 (the default is bucket)
		{"normal", "zen", []string{"--partitioner", "hash", "--r1-factor", "0.05", "--r2-fraction", "0.01"}}, // serial memory overflows
		{"avg", "zen", []string{"--average"}},
		{"dense", "zen", []string{"--row-width", "1"}},
		{"avgdense", "zen", []string{"--row-width", "1", "--average"}},
		{"dense", "agsparse", []string{"--row-width", "1"}},
		{"normal", "zen", []string{"--output", "dense"}},
		{"exact", "sparcml", []string{"--output", "dense"}},
		{"normal", "bp-coo", nil},
		{"normal", "agsparse", nil},
		{"normal", "sparse-ps", nil},
		{"normal", "omnireduce", nil},
		{"normal", "hitopk", []string{"--local-size", "1"}},
		{"exact", "hitopk", []string{"--local-size", "2"}},
		{"exact", "sparcml", nil},
		{"exact", "dense", nil},
		{"exact", "auto", []string{"--profile-iters", "1"}},
	} {
		t.Run(c.scheme+"/"+c.data+"/"+strings.Join(c.args, ""), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
			defer cancel()
			stats := filepath.Join(t.TempDir(), "stats")
			files := inputs[c.data]
			ps := syncRanks(t, ctx, world, func(r int) io.Reader { return fileReader(t, files[r]) },
				append([]string{"--scheme", c.scheme, "--seed", "3", "--stats", stats + fmt.Sprint(0)}, c.args...)...)
			for r, p := range ps {
				require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
				sameTensors(t, refs[c.data], frames(t, p.Stdout.Bytes()), fmt.Sprintf("rank %d", r))
			}
		})
	}
}

// The handshake refuses ranks with other seeds; tensors whose lengths
// differ give a clear error on every rank (exit 2).
func TestSyncMismatch(t *testing.T) {
	dir := t.TempDir()
	files := genFiles(t, dir, 3, "--rows", "1000", "--density", "0.1")
	odd := genFiles(t, filepath.Join(t.TempDir()), 3, "--rows", "1001", "--density", "0.1")
	t.Run("length", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ps := syncRanks(t, ctx, 3, func(r int) io.Reader {
			if r == 1 {
				return fileReader(t, odd[1])
			}
			return fileReader(t, files[r])
		})
		for r, p := range ps {
			assert.Equal(t, 2, clitest.ExitCode(p.Cmd.Wait()), "rank %d: %s", r, p.Stderr.String())
			assert.Contains(t, p.Stderr.String(), "1001 rows", "rank %d", r)
		}
		assert.Contains(t, ps[0].Stderr.String(), "rank 1 has tensor")
		assert.Contains(t, ps[1].Stderr.String(), "rank 0 has tensor")
	})
	t.Run("seed", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		bin := clitest.Binary(t, "hashsync")
		ps := syncRanksWith(t, ctx, 3, func(r int) (string, []string) {
			return bin, []string{"--seed", fmt.Sprint(map[bool]int{true: 9, false: 1}[r == 2])}
		}, func(r int) io.Reader { return fileReader(t, files[r]) })
		for r, p := range ps {
			assert.Equal(t, 2, clitest.ExitCode(p.Cmd.Wait()), "rank %d: %s", r, p.Stderr.String())
			assert.Contains(t, p.Stderr.String(), "seed", "rank %d", r)
		}
		assert.Contains(t, ps[0].Stderr.String(), "rank 2 has seed 9")
	})
	t.Run("count", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		two := genFiles(t, t.TempDir(), 3, "--rows", "1000", "--density", "0.1", "--steps", "2")
		ps := syncRanks(t, ctx, 3, func(r int) io.Reader {
			if r == 2 {
				return fileReader(t, two[r])
			}
			return fileReader(t, files[r])
		})
		for r, p := range ps {
			assert.Equal(t, 2, clitest.ExitCode(p.Cmd.Wait()), "rank %d: %s", r, p.Stderr.String())
			assert.Contains(t, p.Stderr.String(), "end of its input", "rank %d", r)
		}
	})
}

// A rank that dies mid-sync makes the others exit 3 naming it: ranks 0, 1
// and 3 have a second tensor and wait for rank 2 in its synchronization;
// rank 2 has only the first, waits for input, and is killed (once every
// rank's mesh is up: during the first tensor's sync or after it).
func TestSyncDeadRank(t *testing.T) {
	dir := t.TempDir()
	a := genFiles(t, filepath.Join(dir), 4, "--rows", "5000", "--density", "0.05", "--seed", "1")
	bdir := filepath.Join(dir, "b")
	require.NoError(t, os.Mkdir(bdir, 0o755))
	b := genFiles(t, bdir, 4, "--rows", "5000", "--density", "0.05", "--seed", "2")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var writers []io.WriteCloser
	bin := clitest.Binary(t, "hashsync")
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	var ps []*proc
	for r := range 4 {
		pr, w, err := os.Pipe()
		require.NoError(t, err)
		p := clitest.Start(t, ctx, bin, []string{"TRAINWIRE_LOG_LEVEL=debug"}, pr, "sync", "--rank", fmt.Sprint(r), "--world", "4", "--master", master, "--timeout", "30s")
		pr.Close() // the rank has its own copy
		ab, err := os.ReadFile(a[r])
		require.NoError(t, err)
		data := ab
		if r != 2 {
			bb, err := os.ReadFile(b[r])
			require.NoError(t, err)
			data = append(append([]byte{}, ab...), bb...)
		}
		go func() { _, _ = w.Write(data) }() // and keep the pipe open
		writers = append(writers, w)
		ps = append(ps, p)
	}
	defer func() {
		for _, w := range writers {
			_ = w.Close()
		}
	}()
	waitLogged(t, ps, "sync: mesh up")
	require.NoError(t, ps[2].Cmd.Process.Signal(syscall.SIGKILL))
	killed := time.Now()
	for r, p := range ps {
		err := p.Cmd.Wait()
		if r == 2 {
			continue
		}
		assert.Equal(t, 3, clitest.ExitCode(err), "rank %d: %s", r, p.Stderr.String())
		assert.Contains(t, p.Stderr.String(), "rank 2", "rank %d does not name the dead rank", r)
	}
	assert.Less(t, time.Since(killed), 20*time.Second)
}
