package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/csync"
)

// model is the tensors every rank's stream holds each step.
type modelTensor struct {
	name  string
	shape []int64
}

var e2eModel = []modelTensor{{"fc.bias", []int64{37}}, {"fc.weight", []int64{12, 37}}, {"conv.weight", []int64{8, 3, 3, 3}}, {"emb", []int64{1001}}}

// rankData returns rank r's gradients, step by step, in e2eModel order.
func rankData(r, steps int) [][][]float32 {
	rng := rand.New(rand.NewPCG(uint64(r), 11))
	out := make([][][]float32, steps)
	for s := range steps {
		for _, t := range e2eModel {
			d, _ := wire.Numel(t.shape)
			x := make([]float32, d)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			out[s] = append(out[s], x)
		}
	}
	return out
}

// streamOf writes rank r's gradients as a stream with step ends.
func streamOf(t *testing.T, data [][][]float32) []byte { return streamFrom(t, data, 0) }

// streamFrom is streamOf with the steps numbered from first.
func streamFrom(t *testing.T, data [][][]float32, first int) []byte {
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	for s0, ts := range data {
		s := s0 + first
		for i, x := range ts {
			f := wire.NewDenseF32(e2eModel[i].name, x, e2eModel[i].shape...)
			f.Step = int64(s)
			require.NoError(t, w.Write(f))
		}
		require.NoError(t, w.EndStep(int64(s)))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

// syncProcs starts world `compressor sync` processes on a fresh port.
func syncProcs(t *testing.T, ctx context.Context, world int, stdin func(r int) io.Reader, extra func(r int) []string, args ...string) []*clitest.Proc {
	bin := clitest.Binary(t, "compressor")
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	ps := make([]*clitest.Proc, world)
	for r := range world {
		a := append([]string{"sync", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--master", master, "--timeout", "20s"}, args...)
		if extra != nil {
			a = append(a, extra(r)...)
		}
		ps[r] = clitest.Start(t, ctx, bin, nil, stdin(r), a...)
	}
	return ps
}

func readFrames(t *testing.T, b []byte) []wire.Frame {
	rd := wire.NewReader(bytes.NewReader(b), wire.Limits{})
	var out []wire.Frame
	for {
		f, err := rd.NextFrame()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		switch f.(type) {
		case *wire.Header, *wire.End:
			continue
		}
		out = append(out, f)
	}
}

// TestSyncProcesses: real processes over TCP and Unix sockets; every
// rank's sums equal the one-process reference bit for bit, step ends in
// place, and the bytes in the stats frames equal the closed forms.
func TestSyncProcesses(t *testing.T) {
	for _, c := range []struct {
		world           int
		algo, coll, mem string
		args            []string
	}{
		{3, "topk", "allgather", "residual", []string{"--ratio", "0.1"}},
		{4, "fp16", "ring", "none", nil},
		{3, "efsignsgd", "partitioned", "efsignsgd", nil},
		{2, "qsgd", "a2a-ag", "none", []string{"--seed", "4"}},
		{4, "randomk", "ring", "residual", []string{"--ratio", "0.2", "--seed", "1"}},
		{3, "terngrad", "rs-ag", "none", nil},
		{3, "powersgd", "powersgd", "powersgd", []string{"--powersgd-rank", "2"}},
		{1, "topk", "allgather", "residual", nil},
		{3, "none", "dense", "none", []string{"--average"}},
	} {
		t.Run(fmt.Sprintf("%d/%s/%s", c.world, c.algo, c.coll), func(t *testing.T) {
			const steps = 2
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			data := make([][][][]float32, c.world)
			for r := range c.world {
				data[r] = rankData(r, steps)
			}
			stats := filepath.Join(t.TempDir(), "stats")
			ps := syncProcs(t, ctx, c.world, func(r int) io.Reader { return bytes.NewReader(streamOf(t, data[r])) },
				func(r int) []string { return []string{"--stats", fmt.Sprint(stats, r)} },
				append([]string{"--algo", c.algo, "--collective", c.coll, "--memory", c.mem}, c.args...)...)
			// The reference, with the same codec options.
			var sf SyncFlags
			sf.SyncCodecFlags = SyncCodecFlags{Ratio: 0.01, Levels: 64, Threshold: 0.01, Samplings: 30, PowerSGDRank: 1, Momentum: 0.9}
			for i := 0; i+1 < len(c.args); i += 2 {
				switch c.args[i] {
				case "--ratio":
					fmt.Sscan(c.args[i+1], &sf.Ratio)
				case "--seed":
					fmt.Sscan(c.args[i+1], &sf.Seed)
				case "--powersgd-rank":
					fmt.Sscan(c.args[i+1], &sf.PowerSGDRank)
				}
			}
			sp := csync.Spec{Collective: c.coll, Memory: c.mem}
			if c.algo != "none" {
				cd, err := codec.New(c.algo, sf.Options())
				require.NoError(t, err)
				sp.Codec = cd
			}
			ref := csync.NewRef(c.world)
			var want [][]float32
			var vols []csync.Volume
			for s := range steps {
				for i, mt := range e2eModel {
					us := make([]*csync.Unit, c.world)
					for r := range c.world {
						us[r] = &csync.Unit{Name: mt.name, Step: int64(s), Shape: mt.shape, Data: data[r][s][i]}
					}
					x, v, err := ref.Sync(us, sp)
					require.NoError(t, err)
					if strings.Contains(strings.Join(c.args, " "), "--average") {
						for j := range x {
							x[j] *= 1 / float32(c.world)
						}
					}
					want = append(want, x)
					vols = append(vols, v)
				}
			}
			for r, p := range ps {
				require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
				fs := readFrames(t, p.Stdout.Bytes())
				k := 0
				for _, f := range fs {
					if se, ok := f.(*wire.StepEnd); ok {
						require.Equal(t, int64(k/len(e2eModel)-1), se.Step, "rank %d: step end after %d tensors", r, k)
						require.Zero(t, k%len(e2eModel))
						continue
					}
					d := f.(*wire.Dense)
					require.Equal(t, e2eModel[k%len(e2eModel)].name, d.Name)
					require.Equal(t, e2eModel[k%len(e2eModel)].shape, d.Shape)
					got, err := d.F32()
					require.NoError(t, err)
					for j := range got {
						if math.Float32bits(got[j]) != math.Float32bits(want[k][j]) {
							t.Fatalf("rank %d tensor %d (%s) element %d: %v, reference %v", r, k, d.Name, j, got[j], want[k][j])
						}
					}
					k++
				}
				require.Equal(t, steps*len(e2eModel), k)
				sb, err := os.ReadFile(fmt.Sprint(stats, r))
				require.NoError(t, err)
				k = 0
				for _, f := range readFrames(t, sb) {
					st, ok := f.(*wire.Stats)
					if !ok {
						continue
					}
					// One frame per batch of units (synced together): its
					// bytes are the sum of theirs.
					units := int(st.Values["units"])
					require.Positive(t, units, "rank %d: stats frame after unit %d", r, k)
					want := map[string]int64{}
					for _, v := range vols[k : k+units] {
						for ph, b := range v {
							want[ph] += b[r]
						}
					}
					for ph, b := range want {
						require.Equal(t, float64(b), st.Values["sent_bytes."+ph], "rank %d units %d..%d: %s", r, k, k+units-1, ph)
					}
					k += units
				}
				require.Equal(t, steps*len(e2eModel), k)
			}
		})
	}
}

// Ranks that disagree on the codec's options, the algorithm or a shape
// fail with exit 2 and an error naming the other rank and the tensor; none
// hangs.
func TestSyncMismatchProcesses(t *testing.T) {
	for _, c := range []struct {
		name  string
		extra func(r int) []string
		data  func(r int) [][][]float32
		want  string
	}{
		{"options", func(r int) []string {
			if r == 1 {
				return []string{"--ratio", "0.5"}
			}
			return nil
		}, nil, "params"},
		{"algo", func(r int) []string {
			if r == 2 {
				return []string{"--algo", "qsgd"}
			}
			return nil
		}, nil, "algo"},
		{"shape", nil, func(r int) [][][]float32 {
			d := rankData(r, 1)
			if r == 0 {
				d[0][1] = d[0][1][:36]
			}
			return d
		}, "shape"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			ps := syncProcs(t, ctx, 3, func(r int) io.Reader {
				d := rankData(r, 1)
				if c.data != nil {
					d = c.data(r)
				}
				if c.name == "shape" && r == 0 {
					return bytes.NewReader(shapeStream(t, d))
				}
				return bytes.NewReader(streamOf(t, d))
			}, c.extra, "--algo", "topk")
			for r, p := range ps {
				err := p.Cmd.Wait()
				require.Error(t, err, "rank %d", r)
				code := clitest.ExitCode(err)
				require.True(t, code == 2 || code == 3, "rank %d: exit %d: %s", r, code, p.Stderr.String())
				if code == 2 {
					require.Contains(t, p.Stderr.String(), c.want, "rank %d", r)
					require.Regexp(t, `rank \d has`, p.Stderr.String(), "rank %d", r)
				}
			}
			// Every rank sees the disagreement itself.
			for r, p := range ps {
				require.Equal(t, 2, p.Cmd.ProcessState.ExitCode(), "rank %d: %s", r, p.Stderr.String())
			}
		})
	}
}

// shapeStream is streamOf with tensor 1 one element short (its shape
// flat).
func shapeStream(t *testing.T, data [][][]float32) []byte {
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	for i, x := range data[0] {
		shape := e2eModel[i].shape
		if int64(len(x)) != prod(shape) {
			shape = []int64{int64(len(x))}
		}
		require.NoError(t, w.Write(wire.NewDenseF32(e2eModel[i].name, x, shape...)))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

func prod(s []int64) int64 {
	n, _ := wire.Numel(s)
	return n
}

// A rank killed mid-sync: the others exit 3 naming it.
func TestSyncRankKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bin := clitest.Binary(t, "compressor")
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	const world = 3
	fs := make([]*clitest.Filter, world)
	for r := range world {
		fs[r] = clitest.StartFilter(t, ctx, bin, nil, "sync", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world),
			"--master", master, "--timeout", "10s", "--algo", "fp16")
	}
	data := make([][][][]float32, world)
	for r := range world {
		data[r] = rankData(r, 2)
		f := wire.NewDenseF32("fc.bias", data[r][0][0], 37)
		fs[r].Write(t, f)
	}
	for r := range world {
		fs[r].Read(t, 1)
	}
	require.NoError(t, fs[2].Cmd.Process.Signal(syscall.SIGKILL))
	for r := range 2 {
		fs[r].Write(t, wire.NewDenseF32("fc.weight", data[r][0][1], 12, 37))
	}
	for r := range 2 {
		err := fs[r].Cmd.Wait()
		require.Equal(t, 3, clitest.ExitCode(err), "rank %d: %s", r, fs[r].Stderr.String())
		require.Contains(t, fs[r].Stderr.String(), "rank 2", "rank %d", r)
	}
}

// A compression plan and a fusion plan executed: each gradient with its
// planned collective, the fused group as one tensor; a plan for another
// model is refused naming the tensor (exit 2).
func TestSyncPlanProcesses(t *testing.T) {
	dir := t.TempDir()
	comp := filepath.Join(dir, "comp.tw")
	fus := filepath.Join(dir, "fus.tw")
	paths := map[string]string{"fc.bias": "F:AR", "fc.weight": "C > F:AG* > D", "conv.weight": "C > F1:A2A* > D > C > F2:AG* > D", "emb": "I1:RS > C > X1:A2A* > D > C > X2:AG* > D > I2:AG"}
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	w.SetMeta(map[string]string{"model": "e2e"})
	for i, mt := range e2eModel {
		require.NoError(t, w.Write(&wire.Plan{Kind: "compression", Algo: "espresso", Groups: [][2]int64{{int64(i), int64(i)}},
			Items: []map[string]any{{"name": mt.name, "numel": prod(mt.shape), "path": paths[mt.name]}}, Meta: map[string]any{"codec": "topk"}}))
	}
	require.NoError(t, w.Close())
	require.NoError(t, os.WriteFile(comp, b.Bytes(), 0o644))
	b.Reset()
	w = wire.NewWriter(&b, "test")
	require.NoError(t, w.Write(&wire.Plan{Kind: "fusion", Algo: "cupcake", Groups: [][2]int64{{0, 1}, {2, 2}, {3, 3}},
		Items: []map[string]any{{"names": []any{"fc.bias", "fc.weight"}}, {"names": []any{"conv.weight"}}, {"names": []any{"emb"}}},
		Meta:  map[string]any{"model": "e2e"}}))
	require.NoError(t, w.Close())
	require.NoError(t, os.WriteFile(fus, b.Bytes(), 0o644))

	const world = 3
	data := make([][][][]float32, world)
	for r := range world {
		data[r] = rankData(r, 2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ps := syncProcs(t, ctx, world, func(r int) io.Reader { return bytes.NewReader(streamOf(t, data[r])) }, nil,
		"--plan", comp+","+fus, "--ratio", "0.2", "--memory", "residual")
	topk, err := codec.New("topk", codec.Options{Ratio: 0.2})
	require.NoError(t, err)
	ref := csync.NewRef(world)
	var want [][]float32
	for s := range 2 {
		// Group 0 (fc.bias + fc.weight) runs fc.weight's allgather.
		us := make([]*csync.Unit, world)
		for r := range world {
			us[r] = &csync.Unit{Name: csync.GroupName([]string{"fc.bias", "fc.weight"}), Step: int64(s), Data: append(append([]float32{}, data[r][s][0]...), data[r][s][1]...)}
		}
		x, _, err := ref.Sync(us, csync.Spec{Collective: csync.AllGather, Codec: topk, Memory: "residual"})
		require.NoError(t, err)
		want = append(want, x[:37], x[37:])
		for i, coll := range []string{csync.Partitioned, csync.Partitioned} {
			mt := e2eModel[2+i]
			for r := range world {
				us[r] = &csync.Unit{Name: mt.name, Step: int64(s), Shape: mt.shape, Data: data[r][s][2+i]}
			}
			x, _, err := ref.Sync(us, csync.Spec{Collective: coll, Codec: topk, Memory: "residual"})
			require.NoError(t, err)
			want = append(want, x)
		}
	}
	for r, p := range ps {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
		require.Equal(t, 8, checkSums(t, r, p.Stdout.Bytes(), want))
	}

	// A plan for another model.
	other := filepath.Join(dir, "other.tw")
	b.Reset()
	w = wire.NewWriter(&b, "test")
	w.SetMeta(map[string]string{"model": "resnet"})
	require.NoError(t, w.Write(&wire.Plan{Kind: "compression", Groups: [][2]int64{{0, 0}},
		Items: []map[string]any{{"name": "layer1.weight", "numel": int64(100), "path": "F:AR"}}, Meta: map[string]any{"codec": "topk"}}))
	require.NoError(t, w.Close())
	require.NoError(t, os.WriteFile(other, b.Bytes(), 0o644))
	ctx2, cancel2 := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel2()
	ps = syncProcs(t, ctx2, 2, func(r int) io.Reader { return bytes.NewReader(streamOf(t, data[r])) }, nil, "--plan", other)
	for r, p := range ps {
		err := p.Cmd.Wait()
		code := clitest.ExitCode(err)
		require.True(t, code == 2 || code == 3, "rank %d: exit %d: %s", r, code, p.Stderr.String())
		if code == 2 {
			require.Contains(t, p.Stderr.String(), `tensor "fc.bias" is not in the compression plan for model "resnet"`)
		}
	}
}

// The error-feedback state carries across runs: two steps in one run
// equal step 0 with --state-out, then step 1 with --state-in, bit for bit
// (partitioned keeps state at two compression points).
func TestSyncStateAcrossRuns(t *testing.T) {
	const world = 3
	dir := t.TempDir()
	data := make([][][][]float32, world)
	for r := range world {
		data[r] = rankData(r, 2)
	}
	args := []string{"--algo", "dgc", "--ratio", "0.05", "--seed", "2", "--collective", "partitioned", "--memory", "dgc"}
	run := func(steps []int, extra func(r int) []string) [][]byte {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		ps := syncProcs(t, ctx, world, func(r int) io.Reader {
			var d [][][]float32
			for _, s := range steps {
				d = append(d, data[r][s])
			}
			return bytes.NewReader(streamFrom(t, d, steps[0]))
		}, extra, args...)
		out := make([][]byte, world)
		for r, p := range ps {
			require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
			var tensors bytes.Buffer
			k := 0
			for _, f := range readFrames(t, p.Stdout.Bytes()) {
				if d, ok := f.(*wire.Dense); ok {
					if k >= len(e2eModel)*(len(steps)-1) {
						tensors.Write(d.Data)
					}
					k++
				}
			}
			out[r] = tensors.Bytes()
		}
		return out
	}
	both := run([]int{0, 1}, nil)
	run([]int{0}, func(r int) []string { return []string{"--state-out", filepath.Join(dir, fmt.Sprint("s", r))} })
	second := run([]int{1}, func(r int) []string { return []string{"--state-in", filepath.Join(dir, fmt.Sprint("s", r))} })
	for r := range world {
		require.NotEmpty(t, both[r])
		require.True(t, bytes.Equal(both[r], second[r]), "rank %d: step 1 differs after a state round trip", r)
	}
}

// checkSums compares rank r's output tensors with want, bit for bit, and
// returns how many it has.
func checkSums(t *testing.T, r int, out []byte, want [][]float32) int {
	t.Helper()
	k := 0
	for _, f := range readFrames(t, out) {
		d, ok := f.(*wire.Dense)
		if !ok {
			continue
		}
		got, err := d.F32()
		require.NoError(t, err)
		require.Less(t, k, len(want), "rank %d: more tensors than the reference", r)
		require.Equal(t, len(want[k]), len(got), "rank %d tensor %d", r, k)
		for j := range got {
			if math.Float32bits(got[j]) != math.Float32bits(want[k][j]) {
				t.Fatalf("rank %d tensor %d (%s) element %d: %v, reference %v", r, k, d.Name, j, got[j], want[k][j])
			}
		}
		k++
	}
	return k
}
