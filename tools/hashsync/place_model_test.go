package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// modelStream is a model frame of a DLRM: 3 embedding tables of 16
// columns (f32) among dense gradients, and a stats frame.
func modelStream(t *testing.T, extra ...wire.Grad) []byte {
	var buf bytes.Buffer
	w := wire.NewWriter(&buf, "place_model_test")
	grads := []wire.Grad{
		{Name: "top.2.weight", Bytes: 256, Numel: 64, DType: wire.F32},
		{Name: "emb.bags.t0.weight", Bytes: 4000 * 16 * 4, Numel: 4000 * 16, DType: wire.F32},
		{Name: "emb.bags.t1.weight", Bytes: 1000 * 16 * 4, Numel: 1000 * 16, DType: wire.F32},
		{Name: "emb.bags.t2.weight", Bytes: 9000 * 16 * 2, Numel: 9000 * 16, DType: wire.F16},
		{Name: "bottom.0.weight", Bytes: 13 * 16 * 4, Numel: 13 * 16, DType: wire.F32},
		{Name: "model.sparse_emb.weight", Bytes: 500 * 16 * 4, Numel: 500 * 16, DType: wire.F32},
		{Name: "member.weight", Bytes: 16 * 4, Numel: 16, DType: wire.F32},
	}
	require.NoError(t, w.Write(&wire.Model{Name: "dlrm", World: 4, Grads: append(grads, extra...)}))
	require.NoError(t, w.Write(&wire.Stats{Tool: "test", Name: "x", Rank: -1}))
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// TestPlaceFromModel: the embedding gradients of a model frame become the
// tables (rows from numel / --model-dim, element bytes from the dtype);
// the dense ones are left out; bad shapes and missing flags are refused.
func TestPlaceFromModel(t *testing.T) {
	code, out, stderr := runPlace(t, modelStream(t), "--ranks", "2", "--model", "-", "--model-dim", "16", "--format", "json")
	require.Equal(t, 0, code, stderr)
	var js struct {
		Tables []struct {
			Name      string `json:"name"`
			Rows      int64  `json:"rows"`
			Dim       int64  `json:"dim"`
			ElemBytes int64  `json:"elem_bytes"`
		} `json:"tables"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &js), out)
	require.Len(t, js.Tables, 4, out) // not member.weight
	assert.Equal(t, "model.sparse_emb", js.Tables[3].Name)
	assert.Equal(t, "emb.bags.t0", js.Tables[0].Name)
	assert.Equal(t, int64(4000), js.Tables[0].Rows)
	assert.Equal(t, int64(9000), js.Tables[2].Rows)
	assert.Equal(t, int64(2), js.Tables[2].ElemBytes)

	code, _, stderr = runPlace(t, modelStream(t), "--ranks", "2", "--model", "-", "--model-dim", "7")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `grads[1] ("emb.bags.t0.weight"): 64000 elements are not rows of 7`)
	code, _, stderr = runPlace(t, modelStream(t), "--ranks", "2", "--model", "-")
	assert.Equal(t, 80, code)
	assert.Contains(t, stderr, "--model-dim")
	code, _, stderr = runPlace(t, modelStream(t), "--ranks", "2", "--model", "-", "--model-dim", "16", "--model-match", "^nothing")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "no gradient matches")
	code, _, stderr = runPlace(t, modelStream(t, wire.Grad{Name: "emb.x", Bytes: 3, Numel: 16, DType: wire.F32}), "--ranks", "2", "--model", "-", "--model-dim", "16")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "3 bytes for 16 elements")
}
