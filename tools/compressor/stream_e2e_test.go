package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// The filters answer step by step (docs/wire.md, "Steps"): each test
// writes step 1 through a pipe, reads its answer while stdin is still
// open, then writes step 2 (ended by a step_end, which comes back after
// the answer), reads that, and closes stdin.

// startFilter runs `compressor args...` as a real process.
func startFilter(t *testing.T, args ...string) *clitest.Filter {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return clitest.StartFilter(t, ctx, clitest.Binary(t, "compressor"), nil, args...)
}

// closeFilter closes stdin and checks the filter ends its stream cleanly
// with count data frames.
func closeFilter(t *testing.T, f *clitest.Filter, count int64) {
	t.Helper()
	rest, code := f.Close(t)
	require.Equal(t, 0, code, f.Stderr.String())
	require.Len(t, rest, 1)
	assert.Equal(t, count, rest[0].(*wire.End).Count)
}

// compress encodes x (in process) as one fp16 frame of step.
func compress(t *testing.T, name string, step int64, x []float32) *wire.Compressed {
	t.Helper()
	out, errs, code := runIn(t, stream(t, dense(name, step, x)), "encode", "--algo", "fp16")
	require.Equal(t, 0, code, errs)
	return frames(t, out)[0].(*wire.Compressed)
}

func TestEncodeAnswersStepByStep(t *testing.T) {
	f := startFilter(t, "encode", "--algo", "topk", "--ratio", "0.5", "--memory", "residual")
	f.Write(t, dense("g", 1, []float32{1, -3, 2, 0}))
	got := f.Read(t, 1)
	c := got[0].(*wire.Compressed)
	assert.Equal(t, "topk", c.Algo)
	assert.Equal(t, int64(1), c.Step)

	f.Write(t, dense("g", 2, []float32{0, 0, 0, 5}), &wire.StepEnd{Step: 2})
	got = f.Read(t, 2)
	y, err := codec.Decode(got[0].(*wire.Compressed), nil)
	require.NoError(t, err)
	// Error feedback carried the 1 that step 1's top-2 left out into step 2.
	assert.Equal(t, []float32{1, 0, 0, 5}, y)
	assert.Equal(t, &wire.StepEnd{Step: 2}, got[1])
	closeFilter(t, f, 2)
}

func TestDecodeAnswersStepByStep(t *testing.T) {
	f := startFilter(t, "decode")
	f.Write(t, compress(t, "g", 1, []float32{1, 2}))
	got := f.Read(t, 1)
	x, err := got[0].(*wire.Dense).F32()
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2}, x)

	f.Write(t, compress(t, "g", 2, []float32{3, 4}), &wire.StepEnd{Step: 2})
	got = f.Read(t, 2)
	x, err = got[0].(*wire.Dense).F32()
	require.NoError(t, err)
	assert.Equal(t, []float32{3, 4}, x)
	assert.Equal(t, &wire.StepEnd{Step: 2}, got[1])
	closeFilter(t, f, 2)
}

// TestSumAnswersStepByStep: a step of sum is every frame up to its
// step_end (here two ranks' frames of one tensor).
func TestSumAnswersStepByStep(t *testing.T) {
	f := startFilter(t, "sum")
	for step := int64(1); step <= 2; step++ {
		s := float32(step)
		f.Write(t, compress(t, "g", step, []float32{1, s}), compress(t, "g", step, []float32{2, s}), &wire.StepEnd{Step: step})
		got := f.Read(t, 2)
		y, err := codec.Decode(got[0].(*wire.Compressed), nil)
		require.NoError(t, err)
		assert.Equal(t, []float32{3, 2 * s}, y, "step %d", step)
		assert.Equal(t, &wire.StepEnd{Step: step}, got[1])
	}
	closeFilter(t, f, 2)
}

// TestDumpAnswersStepByStep: dump prints each frame's line as soon as the
// frame is read, headers and step ends included.
func TestDumpAnswersStepByStep(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	f := clitest.StartLineFilter(t, ctx, clitest.Binary(t, "compressor"), nil, "dump")
	typeOf := func(line string) string {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		return m["t"].(string)
	}
	f.Write(t, dense("g", 1, []float32{1}))
	got := f.ReadLines(t, 2)
	assert.Equal(t, []string{"header", "dense"}, []string{typeOf(got[0]), typeOf(got[1])})

	f.Write(t, dense("g", 2, []float32{2}), &wire.StepEnd{Step: 2})
	got = f.ReadLines(t, 2)
	assert.Equal(t, []string{"dense", "step_end"}, []string{typeOf(got[0]), typeOf(got[1])})
	assert.Contains(t, got[1], `"step":2`)

	rest, code := f.Close(t)
	require.Equal(t, 0, code, f.Stderr.String())
	require.Len(t, rest, 1)
	assert.Equal(t, "end", typeOf(rest[0].(string)))
}

// steps writes frames as one stream, a step_end after each group.
func steps(t *testing.T, groups ...[]wire.Frame) []byte {
	t.Helper()
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	for i, g := range groups {
		for _, f := range g {
			require.NoError(t, w.Write(f))
		}
		require.NoError(t, w.EndStep(int64(i+1)))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

// TestSumStepsOfSeveralInputs: with one input per rank, sum reads a step
// of each in turn; the inputs' steps must line up.
func TestSumStepsOfSeveralInputs(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for r := range 2 {
		var groups [][]wire.Frame
		for step := int64(1); step <= 2; step++ {
			groups = append(groups, []wire.Frame{compress(t, "g", step, []float32{float32(r), float32(step)})})
		}
		files = append(files, filepath.Join(dir, fmt.Sprintf("r%d.tw", r)))
		require.NoError(t, os.WriteFile(files[r], steps(t, groups...), 0o644))
	}
	out, errs, code := runIn(t, nil, append([]string{"sum"}, files...)...)
	require.Equal(t, 0, code, errs)
	r := wire.NewReader(bytes.NewReader(out), wire.Limits{})
	var got []string
	for {
		f, err := r.NextFrame()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		switch f := f.(type) {
		case *wire.Compressed:
			y, err := codec.Decode(f, nil)
			require.NoError(t, err)
			got = append(got, fmt.Sprint(y))
		case *wire.StepEnd:
			got = append(got, fmt.Sprint("end ", f.Step))
		}
	}
	assert.Equal(t, []string{"[1 2]", "end 1", "[1 4]", "end 2"}, got)

	// A rank whose stream has one step fewer: exit 2, saying so.
	short := filepath.Join(dir, "short.tw")
	require.NoError(t, os.WriteFile(short, steps(t, []wire.Frame{compress(t, "g", 1, []float32{1, 1})}), 0o644))
	_, errs, code = runIn(t, nil, "sum", files[0], short)
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "must line up")
}

// TestDecodeJoinStepEndsCompleteTensors: every chunk of a tensor comes
// before its step's end; a step_end that leaves one incomplete is exit 2.
func TestDecodeJoinStepEndsCompleteTensors(t *testing.T) {
	enc, errs, code := runIn(t, stream(t, dense("w", 1, gauss(8, 1))), "encode", "--algo", "fp16", "--parts", "2")
	require.Equal(t, 0, code, errs)
	chunks := frames(t, enc)
	require.Len(t, chunks, 2)
	out, errs, code := runIn(t, steps(t, chunks), "decode", "--join")
	require.Equal(t, 0, code, errs)
	assert.Len(t, frames(t, out), 1)
	_, errs, code = runIn(t, steps(t, chunks[:1], chunks[1:]), "decode", "--join")
	assert.Equal(t, 2, code)
	assert.Contains(t, errs, "step 1 ended with 1 incomplete tensor(s)")
}
