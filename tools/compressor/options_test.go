package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"trainwire.dev/lib/wire"
)

// stateFrames reads a --state-out file: frame name → values.
func stateFrames(t *testing.T, path string) map[string][]float32 {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string][]float32{}
	for _, f := range frames(t, b) {
		d := f.(*wire.Dense)
		x, err := d.F32()
		require.NoError(t, err)
		out[d.Name] = x
	}
	return out
}

func TestEncodePointAndEFLR(t *testing.T) {
	dir := t.TempDir()
	in := stream(t, dense("w", 0, gauss(200, 3)))
	st := filepath.Join(dir, "rs.state")
	_, errs, code := runIn(t, in, "encode", "--algo", "topk", "--ratio", "0.1", "--memory", "residual",
		"--point", "rs", "--state-out", st)
	require.Equal(t, 0, code, errs)
	s := stateFrames(t, st)
	assert.Contains(t, s, "w#rs@e")
	assert.Len(t, s["w#rs@e"], 200)

	// --ef-lr keeps the rate in slot lr; a second step at another rate
	// reads it back through --state-in.
	st2 := filepath.Join(dir, "lr.state")
	_, errs, code = runIn(t, in, "encode", "--algo", "signsgd", "--memory", "residual", "--ef-lr", "0.5", "--state-out", st2)
	require.Equal(t, 0, code, errs)
	s = stateFrames(t, st2)
	require.Equal(t, []float32{0.5}, s["w@lr"])
	e0 := s["w@e"]
	st3 := filepath.Join(dir, "lr2.state")
	in1 := stream(t, dense("w", 1, make([]float32, 200)))
	_, errs, code = runIn(t, in1, "encode", "--algo", "topk", "--k", "1", "--memory", "residual", "--ef-lr", "0.25",
		"--state-in", st2, "--state-out", st3)
	require.Equal(t, 0, code, errs)
	s = stateFrames(t, st3)
	require.Equal(t, []float32{0.25}, s["w@lr"])
	// g = 0, so p = 2·e0 and one element (the largest) was sent.
	e1 := s["w@e"]
	zeros := 0
	for i := range e0 {
		if e1[i] == 0 && e0[i] != 0 {
			zeros++
			continue
		}
		require.Equal(t, 2*e0[i], e1[i], "element %d", i)
	}
	assert.Equal(t, 1, zeros)

	for _, bad := range [][]string{
		{"--memory", "dgc", "--ef-lr", "0.1"},
		{"--memory", "residual", "--ef-lr", "-1"},
		{"--memory", "residual", "--point", "a@b"},
		{"--memory", "residual", "--dgc-clip", "1"},
		{"--memory", "dgc", "--dgc-clip", "-1"},
	} {
		_, errs, code = runIn(t, in, append([]string{"encode", "--algo", "topk"}, bad...)...)
		assert.Equal(t, 80, code, "%v: %s", bad, errs)
	}
}

func TestListMemoriesAndOptions(t *testing.T) {
	out, errs, code := runIn(t, nil, "list")
	require.Equal(t, 0, code, errs)
	for _, s := range []string{"MEMORY", "--ef-lr", "--dgc-clip", "--point", "--average", "clip=0", "levels=64 (1..32767)", "warmup=0"} {
		assert.Contains(t, string(out), s)
	}
	// terngrad's clip and qsgd's wide codes through the tool.
	in := stream(t, dense("w", 0, gauss(300, 4)))
	enc, errs, code := runIn(t, in, "encode", "--algo", "qsgd", "--levels", "1000")
	require.Equal(t, 0, code, errs)
	f := frames(t, enc)[0].(*wire.Compressed)
	assert.Equal(t, wire.I16, f.Parts[1].DType)
	dec, errs, code := runIn(t, enc, "decode")
	require.Equal(t, 0, code, errs)
	assert.Len(t, frames(t, dec), 1)
	enc, errs, code = runIn(t, in, "encode", "--algo", "terngrad", "--clip", "2.5")
	require.Equal(t, 0, code, errs)
	f = frames(t, enc)[0].(*wire.Compressed)
	assert.Equal(t, 2.5, f.Params["clip"])
	// DGC warm-up and clipping through the tool: step 0 sends 25%.
	in = stream(t, dense("w", 0, gauss(400, 5)))
	enc, errs, code = runIn(t, in, "encode", "--algo", "dgc", "--dgc-warmup", "10", "--memory", "dgc", "--dgc-clip", "1")
	require.Equal(t, 0, code, errs)
	f = frames(t, enc)[0].(*wire.Compressed)
	assert.Len(t, f.Parts[1].Data, 4*100)
	_, errs, code = runIn(t, enc, "decode")
	require.Equal(t, 0, code, errs)
}
