package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
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

// a2aInput writes rank r's input of world n: two alltoalls, f32 lookup
// rows of width 3 and i64 indices (the chapter's lengths-then-indices),
// with random split sizes, zeros included.
func a2aInput(t *testing.T, dir string, n, r int) string {
	rng := rand.New(rand.NewPCG(uint64(n), uint64(r)))
	path := filepath.Join(dir, fmt.Sprintf("in.%d.%d.tw", n, r))
	f, err := os.Create(path)
	require.NoError(t, err)
	defer f.Close()
	w := wire.NewWriter(f, "alltoall_e2e_test")
	for _, tc := range []struct {
		name  string
		width int
		dt    wire.DType
		most  int
	}{{"lookups", 3, wire.F32, 4}, {"indices", 1, wire.I64, 6}} {
		splits := make([]byte, 8*n)
		rows := 0
		for k := range n {
			s := rng.IntN(tc.most + 1)
			binary.LittleEndian.PutUint64(splits[8*k:], uint64(s))
			rows += s
		}
		data := make([]byte, rows*tc.width*tc.dt.Size())
		for i := 0; i < len(data); i += 4 {
			v := rng.Uint32()
			if tc.dt == wire.F32 && math.IsNaN(float64(math.Float32frombits(v))) {
				v = 0x7f7fffff
			}
			binary.LittleEndian.PutUint32(data[i:], v)
		}
		shape := []int64{int64(rows), int64(tc.width)}
		if tc.width == 1 {
			shape = shape[:1]
		}
		require.NoError(t, w.Write(&wire.Dense{Name: tc.name + ".splits", Rank: -1, DType: wire.I64, Shape: []int64{int64(n)}, Data: splits}))
		require.NoError(t, w.Write(&wire.Dense{Name: tc.name, Rank: int64(r), DType: tc.dt, Shape: shape, Data: data}))
	}
	require.NoError(t, w.Close())
	return path
}

// denseFrames reads a stream's data frames.
func denseFrames(t *testing.T, r io.Reader) []*wire.Dense {
	rd := wire.NewReader(r, wire.Limits{})
	var out []*wire.Dense
	for {
		f, err := rd.NextFrame()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		if d, ok := f.(*wire.Dense); ok {
			out = append(out, d)
		}
	}
}

// runA2A runs `hashsync alltoall` on world ranks and returns their stdout.
func runA2A(t *testing.T, ctx context.Context, inputs []string, args ...string) [][]byte {
	bin := clitest.Binary(t, "hashsync")
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	n := len(inputs)
	procs := make([]*clitest.Proc, n)
	for r := range n {
		procs[r] = clitest.Start(t, ctx, bin, nil, nil, append([]string{"alltoall", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(n),
			"--master", master, inputs[r]}, args...)...)
	}
	outs := make([][]byte, n)
	for r, p := range procs {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
		outs[r] = []byte(p.Stdout.String())
	}
	return outs
}

// TestAllToAllEqualsTorch: for worlds 1 to 8, every mode of `hashsync
// alltoall` gives exactly what torch's all_to_all_single (gloo) gives on
// the same inputs: the same split sizes and the same bytes.
func TestAllToAllEqualsTorch(t *testing.T) {
	if _, err := exec.Command("/usr/bin/python3", "-c", "import torch.distributed").CombinedOutput(); err != nil {
		t.Skipf("/usr/bin/python3 has no torch.distributed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Second)
	defer cancel()
	dir := t.TempDir()
	worlds := []int{1, 2, 3, 4, 5, 6, 7, 8}
	inputs := map[int][]string{}
	args := []string{"testdata/a2a_torch.py", dir}
	for _, n := range worlds {
		for r := range n {
			inputs[n] = append(inputs[n], a2aInput(t, dir, n, r))
		}
		args = append(args, fmt.Sprint(n))
	}
	py := exec.CommandContext(ctx, "/usr/bin/python3", args...)
	py.Env = append(os.Environ(), "PYTHONPATH=../../clients/python")
	out, err := py.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, n := range worlds {
		for _, mode := range []string{"async", "sync", "scatter"} {
			outs := runA2A(t, ctx, inputs[n], "--mode", mode)
			for r := range n {
				tf, err := os.Open(filepath.Join(dir, fmt.Sprintf("torch.%d.%d.tw", n, r)))
				require.NoError(t, err)
				want := denseFrames(t, tf)
				tf.Close()
				got := denseFrames(t, bytes.NewReader(outs[r]))
				require.Len(t, got, 4, "world %d rank %d %s", n, r, mode)
				for i := range want {
					assert.Equal(t, want[i].Name, got[i].Name)
					assert.Equal(t, want[i].DType, got[i].DType, "world %d rank %d %s %s", n, r, mode, want[i].Name)
					assert.Equal(t, want[i].Shape, got[i].Shape, "world %d rank %d %s %s", n, r, mode, want[i].Name)
					assert.True(t, bytes.Equal(want[i].Data, got[i].Data), "world %d rank %d %s %s: bytes differ from torch's", n, r, mode, want[i].Name)
				}
			}
		}
	}
}

// TestAllToAllKilledRankIsNamed: a rank killed in the middle of a long
// run of alltoalls fails every other rank with exit code 3 and its rank
// named, in every mode.
func TestAllToAllKilledRankIsNamed(t *testing.T) {
	for _, mode := range []string{"async", "scatter"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			dir := t.TempDir()
			bin := clitest.Binary(t, "hashsync")
			master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
			procs := make([]*clitest.Proc, 4)
			for r := range 4 {
				procs[r] = clitest.Start(t, ctx, bin, nil, nil, "alltoall", "--rank", fmt.Sprint(r), "--world", "4", "--master", master,
					"--mode", mode, "--repeat", "10000000", "--timeout", "10s", a2aInput(t, dir, 4, r))
			}
			waitLogged(t, procs, "alltoall: mesh up")
			time.Sleep(200 * time.Millisecond)
			const victim = 1
			require.NoError(t, procs[victim].Cmd.Process.Signal(syscall.SIGKILL))
			for r, p := range procs {
				err := p.Cmd.Wait()
				if r == victim {
					continue
				}
				assert.Equal(t, 3, clitest.ExitCode(err), "rank %d: %s", r, p.Stderr.String())
				assert.Contains(t, p.Stderr.String(), "mesh: rank 1", "rank %d does not name the dead rank", r)
			}
		})
	}
}

// TestAllToAllBadInput: inputs that cannot be an alltoall are refused
// with exit code 2, naming the frame, and the other ranks fail too.
func TestAllToAllBadInput(t *testing.T) {
	for _, tc := range []struct {
		name   string
		frames []wire.Frame
		want   string
	}{
		{"no splits", []wire.Frame{wire.NewDenseF32("x", []float32{1, 2})}, `data frame 1 ("x"): want the split sizes "<name>.splits" first`},
		{"bad sum", []wire.Frame{i64Frame("x.splits", 1, 2), wire.NewDenseF32("x", []float32{1, 2})}, `split sizes "x.splits" sum to 3 rows, "x" has 2`},
		{"wrong name", []wire.Frame{i64Frame("x.splits", 1, 1), wire.NewDenseF32("y", []float32{1, 2})}, `rows "y" follow the split sizes of "x"`},
		{"wrong world", []wire.Frame{i64Frame("x.splits", 2), wire.NewDenseF32("x", []float32{1, 2})}, `want i64 of shape [2] (the world), got i64 [1]`},
		{"negative", []wire.Frame{i64Frame("x.splits", 1, -1), wire.NewDenseF32("x", []float32{1, 2})}, `-1 rows for rank 1, of 2`},
		{"splits only", []wire.Frame{i64Frame("x.splits", 1, 1)}, `input ends after the split sizes "x.splits", without their rows`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			dir := t.TempDir()
			bad := filepath.Join(dir, "bad.tw")
			var buf bytes.Buffer
			w := wire.NewWriter(&buf, "test")
			for _, f := range tc.frames {
				require.NoError(t, w.Write(f))
			}
			require.NoError(t, w.Close())
			require.NoError(t, os.WriteFile(bad, buf.Bytes(), 0o644))
			bin := clitest.Binary(t, "hashsync")
			master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
			good := clitest.Start(t, ctx, bin, nil, nil, "alltoall", "--rank", "0", "--world", "2", "--master", master, a2aInput(t, dir, 2, 0))
			p := clitest.Start(t, ctx, bin, nil, nil, "alltoall", "--rank", "1", "--world", "2", "--master", master, bad)
			err := p.Cmd.Wait()
			assert.Equal(t, 2, clitest.ExitCode(err), p.Stderr.String())
			assert.Contains(t, p.Stderr.String(), tc.want)
			assert.NotEqual(t, 0, clitest.ExitCode(good.Cmd.Wait()), good.Stderr.String())
			assert.True(t, strings.Contains(good.Stderr.String(), "rank 1"), good.Stderr.String())
		})
	}
}

func i64Frame(name string, v ...int64) *wire.Dense {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return &wire.Dense{Name: name, Rank: -1, DType: wire.I64, Shape: []int64{int64(len(v))}, Data: b}
}
