package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

func gauss(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// stream writes dense frames (name, step, data) as one stream.
func stream(t *testing.T, frames ...*wire.Dense) []byte {
	t.Helper()
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	for _, f := range frames {
		require.NoError(t, w.Write(f))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

func dense(name string, step int64, x []float32, shape ...int64) *wire.Dense {
	d := wire.NewDenseF32(name, x, shape...)
	d.Step = step
	return d
}

func runIn(t *testing.T, stdin []byte, args ...string) ([]byte, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, bytes.NewReader(stdin), &out, &errb)
	return out.Bytes(), errb.String(), code
}

func frames(t *testing.T, b []byte) []wire.Frame {
	t.Helper()
	r := wire.NewReader(bytes.NewReader(b), wire.Limits{})
	var out []wire.Frame
	for {
		f, err := r.Next()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		out = append(out, f)
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	x := gauss(3000, 1)
	in := stream(t, dense("a", 1, x, 30, 100), dense("b", 1, x[:7]))
	for _, algo := range codec.Algos() {
		enc, errs, code := runIn(t, in, "encode", "--algo", algo, "--ratio", "1", "--rank", "64")
		require.Equal(t, 0, code, "%s: %s", algo, errs)
		fs := frames(t, enc)
		require.Len(t, fs, 2)
		cf := fs[0].(*wire.Compressed)
		assert.Equal(t, algo, cf.Algo)
		assert.Equal(t, []int64{30, 100}, cf.Shape)
		dec, errs, code := runIn(t, enc, "decode")
		require.Equal(t, 0, code, "%s: %s", algo, errs)
		ds := frames(t, dec)
		require.Len(t, ds, 2)
		d := ds[0].(*wire.Dense)
		assert.Equal(t, "a", d.Name)
		assert.Equal(t, int64(1), d.Step)
		y, err := d.F32()
		require.NoError(t, err)
		require.Len(t, y, len(x))
		if algo == "topk" || algo == "mstopk" || algo == "dgc" || algo == "randomk" {
			for i := range x {
				require.Equal(t, math.Float32bits(x[i]), math.Float32bits(y[i]), "%s: ratio 1 element %d", algo, i)
			}
		}
	}
}

// TestStateCheckpoint: encoding two steps in one process gives the same
// frames as one step, --state-out, and a second process with --state-in.
func TestStateCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s1 := stream(t, dense("w", 1, gauss(2000, 1), 20, 100), dense("v", 1, gauss(50, 2)))
	s2 := stream(t, dense("w", 2, gauss(2000, 3), 20, 100), dense("v", 2, gauss(50, 4)))
	for _, c := range []struct{ algo, memory string }{
		{"topk", "residual"}, {"dgc", "dgc"}, {"efsignsgd", "efsignsgd"}, {"powersgd", "powersgd"}, {"signum", "none"},
	} {
		args := []string{"encode", "--algo", c.algo, "--memory", c.memory, "--ratio", "0.05"}
		both, errs, code := runIn(t, append(s1, s2...), args...)
		require.Equal(t, 0, code, errs)
		st := filepath.Join(dir, c.algo+".state")
		_, errs, code = runIn(t, s1, append(args, "--state-out", st)...)
		require.Equal(t, 0, code, errs)
		second, errs, code := runIn(t, s2, append(args, "--state-in", st)...)
		require.Equal(t, 0, code, errs)
		want := frames(t, both)[2:]
		got := frames(t, second)
		require.Equal(t, len(want), len(got))
		for i := range want {
			assert.Equal(t, want[i], got[i], "%s/%s frame %d", c.algo, c.memory, i)
		}
		// The state file is a stream dump can read: dense frames TENSOR@SLOT.
		sf, err := os.ReadFile(st)
		require.NoError(t, err)
		for _, f := range frames(t, sf) {
			assert.Contains(t, f.(*wire.Dense).Name, "@")
		}
	}
}

func TestExitCodes(t *testing.T) {
	x := gauss(100, 1)
	_, errs, code := runIn(t, stream(t, dense("w", 0, x)), "encode", "--algo", "nope")
	assert.Equal(t, 80, code, errs)
	x[5] = float32(math.NaN())
	_, errs, code = runIn(t, stream(t, dense("w", 0, x)), "encode", "--algo", "topk")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "NaN")
	_, errs, code = runIn(t, []byte("garbage"), "encode", "--algo", "topk")
	assert.Equal(t, 2, code, errs)
	f64 := &wire.Dense{Name: "d", DType: wire.F64, Shape: []int64{1}, Data: make([]byte, 8)}
	_, errs, code = runIn(t, stream(t, f64), "encode", "--algo", "topk")
	assert.Equal(t, 2, code, errs)
	// A frame relabelled with another algorithm fails to decode, clearly.
	enc, _, _ := runIn(t, stream(t, dense("w", 0, gauss(100, 2))), "encode", "--algo", "fp16")
	cf := frames(t, enc)[0].(*wire.Compressed)
	cf.Algo = "qsgd"
	cf.Params = map[string]any{"levels": int64(64), "seed": int64(0)}
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	require.NoError(t, w.Write(cf))
	require.NoError(t, w.Close())
	_, errs, code = runIn(t, b.Bytes(), "decode")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `1 parts, want 2 (norm, codes)`)
}

func TestSumVerb(t *testing.T) {
	dir := t.TempDir()
	var files []string
	want := make([]float32, 1000)
	for r := range 3 {
		x := gauss(1000, uint64(r))
		enc, errs, code := runIn(t, stream(t, dense("w", 9, x)), "encode", "--algo", "randomk", "--ratio", "0.1", "--seed", "5")
		require.Equal(t, 0, code, errs)
		y, err := codec.Decode(frames(t, enc)[0].(*wire.Compressed), nil)
		require.NoError(t, err)
		for i := range y {
			want[i] += y[i]
		}
		p := filepath.Join(dir, "r"+string(rune('0'+r)))
		require.NoError(t, os.WriteFile(p, enc, 0o644))
		files = append(files, p)
	}
	out, errs, code := runIn(t, nil, append([]string{"sum"}, files...)...)
	require.Equal(t, 0, code, errs)
	fs := frames(t, out)
	require.Len(t, fs, 1)
	got, err := codec.Decode(fs[0].(*wire.Compressed), nil)
	require.NoError(t, err)
	for i := range want {
		assert.InDelta(t, want[i], got[i], 1e-5)
	}
	// --average: the same sum divided by the 3 frames, once, in f32.
	out, errs, code = runIn(t, nil, append([]string{"sum", "--average"}, files...)...)
	require.Equal(t, 0, code, errs)
	avg, err := codec.Decode(frames(t, out)[0].(*wire.Compressed), nil)
	require.NoError(t, err)
	for i := range got {
		require.Equal(t, got[i]/3, avg[i], "element %d", i)
	}
	// Not summable: exit 2 with the reason.
	enc, _, _ := runIn(t, stream(t, dense("w", 0, gauss(10, 1))), "encode", "--algo", "qsgd")
	_, errs, code = runIn(t, append(enc, enc...), "sum")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "not summable")
}

func TestListAndBench(t *testing.T) {
	out, errs, code := runIn(t, nil, "list", "--format", "json")
	require.Equal(t, 0, code, errs)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	assert.Len(t, lines, len(codec.Algos()))
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &m))
	assert.Contains(t, m, "size")
	assert.Contains(t, m, "summable")

	out, errs, code = runIn(t, nil, "bench", "--algos", "topk,fp16", "--sizes", "4KiB,64KiB", "--iters", "2", "--warmup", "0")
	require.Equal(t, 0, code, errs)
	fs := frames(t, out)
	require.Len(t, fs, 6) // (memcpy + 2) × 2 sizes
	for _, f := range fs {
		s := f.(*wire.Stats)
		assert.Equal(t, "compressor.bench", s.Name)
		assert.Greater(t, s.Values["encode_ns_mean"], 0.0)
		if s.Labels["algo"] == "fp16" {
			assert.Equal(t, 0.5, s.Values["ratio"])
		}
	}
}

// TestBinaryPipeline runs the built binary: encode | decode.
func TestBinaryPipeline(t *testing.T) {
	bin := clitest.Binary(t, "compressor")
	x := gauss(4096, 3)
	enc := exec.Command(bin, "encode", "--algo", "fp16")
	enc.Stdin = bytes.NewReader(stream(t, dense("w", 0, x, 64, 64)))
	var encOut, encErr bytes.Buffer
	enc.Stdout, enc.Stderr = &encOut, &encErr
	require.NoError(t, enc.Run(), encErr.String())
	dec := exec.Command(bin, "decode")
	dec.Stdin = &encOut
	var decOut, decErr bytes.Buffer
	dec.Stdout, dec.Stderr = &decOut, &decErr
	require.NoError(t, dec.Run(), decErr.String())
	d := frames(t, decOut.Bytes())[0].(*wire.Dense)
	y, err := d.F32()
	require.NoError(t, err)
	for i := range x {
		require.Equal(t, codec.F16ToF32(codec.F32ToF16(x[i])), y[i])
	}
	assert.Contains(t, encErr.String(), "encoded")
}

func TestDecodeRefusesForgedShape(t *testing.T) {
	x := make([]float32, 100)
	x[3] = 9
	enc, stderr, code := runIn(t, stream(t, dense("w", 0, x)), "encode", "--algo", "threshold", "--threshold", "1")
	require.Equal(t, 0, code, stderr)
	cf := frames(t, enc)[0].(*wire.Compressed)
	cf.Shape = []int64{1 << 31} // 8 GiB dense, over the 4 GiB payload limit
	var in bytes.Buffer
	w := wire.NewWriter(&in, "test")
	require.NoError(t, w.Write(cf))
	require.NoError(t, w.Close())
	out, stderr, code := runIn(t, in.Bytes(), "decode")
	assert.Equal(t, 2, code, stderr)
	assert.Contains(t, stderr, "over the limit")
	assert.Empty(t, out, "no dense frame may be written")
}

// Partitioned compression (encode --parts, seed-espresso.md §7a item 12):
// chunks NAME[c/P] with equal payloads and chunk-local indices; decode
// --join gives the tensor back; summing each chunk over ranks (as the
// receiver of an Alltoall does) and joining gives the sum of the ranks'
// tensors; a missing or repeated chunk is a clear error.
func TestPartsVerbs(t *testing.T) {
	dir := t.TempDir()
	const d, P = 1001, 4
	var files []string
	want := make([]float64, d)
	for r := range 3 {
		x := gauss(d, uint64(10+r))
		// topk per chunk: k = ceil(0.05·251) = 13 values in every chunk.
		enc, errs, code := runIn(t, stream(t, dense("w", 3, x, 7, 143)), "encode", "--algo", "topk", "--ratio", "0.05", "--parts", "4")
		require.Equal(t, 0, code, errs)
		fs := frames(t, enc)
		require.Len(t, fs, P)
		for k, f := range fs {
			cf := f.(*wire.Compressed)
			require.Equal(t, codec.PartName("w", k, P), cf.Name)
			require.Equal(t, []int64{(d + P - 1) / P}, cf.Shape)
			require.Len(t, cf.Parts[0].Data, 4*13, "chunk %d", k)
		}
		out, errs, code := runIn(t, enc, "decode", "--join")
		require.Equal(t, 0, code, errs)
		joined := frames(t, out)
		require.Len(t, joined, 1)
		jd := joined[0].(*wire.Dense)
		require.Equal(t, "w", jd.Name)
		require.Equal(t, []int64{7, 143}, jd.Shape)
		y, err := jd.F32()
		require.NoError(t, err)
		kept := 0
		for i, v := range y {
			if v != 0 {
				kept++
				require.Equal(t, x[i], v)
			}
		}
		require.Equal(t, P*13, kept)
		// fp16 chunks, summed over the ranks below.
		enc, errs, code = runIn(t, stream(t, dense("w", 3, x, 7, 143)), "encode", "--algo", "fp16", "--parts", "4")
		require.Equal(t, 0, code, errs)
		out, errs, code = runIn(t, enc, "decode", "--join")
		require.Equal(t, 0, code, errs)
		y, err = frames(t, out)[0].(*wire.Dense).F32()
		require.NoError(t, err)
		for i := range y {
			want[i] += float64(y[i])
		}
		p := filepath.Join(dir, fmt.Sprintf("r%d", r))
		require.NoError(t, os.WriteFile(p, enc, 0o644))
		files = append(files, p)
	}
	sum, errs, code := runIn(t, nil, append([]string{"sum"}, files...)...)
	require.Equal(t, 0, code, errs)
	require.Len(t, frames(t, sum), P)
	out, errs, code := runIn(t, sum, "decode", "--join")
	require.Equal(t, 0, code, errs)
	got, err := frames(t, out)[0].(*wire.Dense).F32()
	require.NoError(t, err)
	for i := range want {
		require.InDelta(t, want[i], float64(got[i]), 2e-3*(1+math.Abs(want[i])), "element %d", i)
	}
	// Each chunk alone decodes to a dense chunk (what rank c of the
	// Alltoall keeps).
	out, errs, code = runIn(t, sum, "decode")
	require.Equal(t, 0, code, errs)
	require.Equal(t, "w[2/4]", frames(t, out)[2].(*wire.Dense).Name)

	// Errors: a missing chunk, a repeated one, a whole tensor under --join.
	enc, _, _ := runIn(t, stream(t, dense("w", 0, gauss(10, 1))), "encode", "--algo", "fp16", "--parts", "3")
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	for _, f := range frames(t, enc)[:2] {
		require.NoError(t, w.Write(f))
	}
	require.NoError(t, w.Close())
	_, errs, code = runIn(t, b.Bytes(), "decode", "--join")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `"w" step 0 rank -1 (first chunk at frame 0) lacks chunks 2 of 3`)
	b.Reset()
	w = wire.NewWriter(&b, "test")
	fs := frames(t, enc)
	for _, f := range []wire.Frame{fs[0], fs[0]} {
		require.NoError(t, w.Write(f))
	}
	require.NoError(t, w.Close())
	_, errs, code = runIn(t, b.Bytes(), "decode", "--join")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "frame 1: chunk 0/3 of \"w\" (step 0, rank -1) twice")
	whole, _, _ := runIn(t, stream(t, dense("w", 0, gauss(10, 1))), "encode", "--algo", "fp16")
	_, errs, code = runIn(t, whole, "decode", "--join")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, "frame 0: tensor \"w\" is not partitioned")
	// Tensors held for joining count against --max-payload together: two
	// incomplete 4000-byte tensors do not fit in 6000 bytes.
	b.Reset()
	w = wire.NewWriter(&b, "test")
	for _, name := range []string{"a", "b"} {
		enc, _, _ := runIn(t, stream(t, dense(name, 0, gauss(1000, 1))), "encode", "--algo", "fp16", "--parts", "2")
		require.NoError(t, w.Write(frames(t, enc)[0]))
	}
	require.NoError(t, w.Close())
	_, errs, code = runIn(t, b.Bytes(), "decode", "--join", "--max-payload", "6000")
	assert.Equal(t, 2, code, errs)
	assert.Contains(t, errs, `frame 1: tensor "b" of shape [1000]: 4000 bytes held for joining with the 4000 of 1 incomplete tensor(s), over the 6000-byte limit`)
	_, errs, code = runIn(t, whole, "encode", "--algo", "fp16", "--parts", "-1")
	assert.Equal(t, 80, code, errs)
}
