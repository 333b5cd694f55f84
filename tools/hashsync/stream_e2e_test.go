package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
)

// TestSyncAnswersStepByStep: a trainer writes step 1's gradient through a
// pipe and waits for its sum before it writes step 2 (docs/wire.md,
// "Steps"). Step 1 is a lone frame (a frame is complete when read); step 2
// ends with a step_end, which comes back after step 2's answer. With and
// without the overlap pipeline.
func TestSyncAnswersStepByStep(t *testing.T) {
	for _, extra := range [][]string{nil, {"--no-overlap", "--barrier"}} {
		t.Run(fmt.Sprint(extra), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
			args := append([]string{"sync", "--rank", "0", "--world", "1", "--master", master, "--timeout", "20s"}, extra...)
			f := clitest.StartFilter(t, ctx, clitest.Binary(t, "hashsync"), nil, args...)
			grad := func(step int64) *wire.Dense {
				d := wire.NewDenseF32("emb", []float32{0, 0, float32(step), 1, 0, 0}, 3, 2)
				d.Step, d.Rank = step, 0
				return d
			}
			f.Write(t, grad(1))
			got := f.Read(t, 1)
			assertSum(t, got[0], grad(1))

			f.Write(t, grad(2), &wire.StepEnd{Step: 2})
			got = f.Read(t, 2)
			assertSum(t, got[0], grad(2))
			assert.Equal(t, &wire.StepEnd{Step: 2}, got[1])

			rest, code := f.Close(t)
			require.Equal(t, 0, code, f.Stderr.String())
			require.Len(t, rest, 1)
			assert.Equal(t, int64(2), rest[0].(*wire.End).Count)
		})
	}
}

// assertSum checks a world-1 sum: the input itself.
func assertSum(t *testing.T, got wire.Frame, want *wire.Dense) {
	t.Helper()
	d, ok := got.(*wire.Dense)
	require.True(t, ok, "answer is a %s frame", got.Type())
	assert.Equal(t, want.Name, d.Name)
	assert.Equal(t, want.Step, d.Step)
	assert.Equal(t, want.Data, d.Data)
}
