package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
)

// TestSyncAnswersStepByStep: a trainer writes one iteration's gradient
// (two tensors) through a pipe and waits for the round's result before it
// computes the next (docs/wire.md, "Steps"). With --tensors 2 the count
// completes an iteration (a step_end between iterations is accepted);
// with --tensors 0 a step_end does, and each round's answer ends with one.
func TestSyncAnswersStepByStep(t *testing.T) {
	for _, tc := range []struct {
		mode, tensors string
		stepped       bool
	}{{"rna", "2", false}, {"rna", "0", true}, {"allreduce", "0", true}} {
		t.Run(tc.mode+"/tensors="+tc.tensors, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
			f := clitest.StartFilter(t, ctx, clitest.Binary(t, "straggle"), nil,
				"sync", "--rank", "0", "--world", "1", "--master", master, "--timeout", "20s", "--mode", tc.mode, "--tensors", tc.tensors)
			iteration := func(step int64, end bool) []wire.Frame {
				a := wire.NewDenseF32("a", []float32{float32(step), 1})
				b := wire.NewDenseF32("b", []float32{2})
				a.Step, b.Step = step, step
				if end {
					return []wire.Frame{a, b, &wire.StepEnd{Step: step}}
				}
				return []wire.Frame{a, b}
			}
			answer := 3 // the round's stats, then the averaged tensors
			if tc.stepped {
				answer++ // and the round's step_end
			}
			var round int64
			for k := range 2 {
				// The first iteration of --tensors 2 is bare, the second ends with a step_end.
				f.Write(t, iteration(round, tc.stepped || k == 1)...)
				got := f.Read(t, answer)
				st := got[0].(*wire.Stats)
				assert.Equal(t, "round", st.Name)
				x, err := got[1].(*wire.Dense).F32()
				require.NoError(t, err)
				assert.Equal(t, []float32{float32(round), 1}, x)
				if tc.stepped {
					assert.Equal(t, &wire.StepEnd{Step: st.Step}, got[3])
				}
				round = st.Step
			}
			rest, code := f.Close(t)
			require.Equal(t, 0, code, f.Stderr.String())
			require.Len(t, rest, 1)
			assert.IsType(t, &wire.End{}, rest[0])
		})
	}
}

// TestSyncStepEndMisplaced: a step_end inside an iteration of --tensors N,
// or one that ends an iteration of another size than the first under
// --tensors 0, is malformed input (exit 2) naming the frame.
func TestSyncStepEndMisplaced(t *testing.T) {
	g := func(name string) *wire.Dense { return wire.NewDenseF32(name, []float32{1}) }
	for _, tc := range []struct {
		tensors string
		frames  []wire.Frame
		want    string
	}{
		{"2", []wire.Frame{g("a"), &wire.StepEnd{}, g("b")}, "frame 2 (step_end) at byte"},
		{"0", []wire.Frame{g("a"), g("b"), &wire.StepEnd{}, g("a"), &wire.StepEnd{Step: 1}}, "step 1 ends after 1 tensors; the first iteration had 2"},
		{"0", []wire.Frame{&wire.StepEnd{}}, "step 0 ends with no tensor"},
	} {
		var buf bytes.Buffer
		w := wire.NewWriter(&buf, "test")
		for _, f := range tc.frames {
			require.NoError(t, w.Write(f))
		}
		require.NoError(t, w.Close())
		in := filepath.Join(t.TempDir(), "in.tw")
		require.NoError(t, os.WriteFile(in, buf.Bytes(), 0o644))
		var stderr bytes.Buffer
		code := run([]string{"sync", "--rank", "0", "--world", "1", "--tensors", tc.tensors, "--input", in}, nil, io.Discard, &stderr)
		assert.Equal(t, 2, code, stderr.String())
		assert.Contains(t, stderr.String(), tc.want)
	}
}
