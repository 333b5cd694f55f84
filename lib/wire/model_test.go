package wire

import (
	"bytes"
	"testing"
)

// FuzzReadModel: any bytes, read as a JSON model or a stream, give a model
// or an error, never a panic.
func FuzzReadModel(f *testing.F) {
	f.Add([]byte(`{"name":"toy","forward_ns":5,"grads":[{"name":"w","bytes":8,"dtype":"f32"}],"comm":[{"op":"allreduce","bytes":8,"ns":3,"world":2}]}`))
	var b bytes.Buffer
	w := NewWriter(&b, "test")
	_ = w.Write(&Model{Name: "m", Grads: []Grad{{Name: "g", Bytes: 4, DType: F32}}})
	_ = w.Close()
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, in []byte) {
		m, err := ReadModel("fuzz", bytes.NewReader(in), Limits{MaxPayload: 1 << 20, MaxElems: 1 << 16})
		if err == nil && m == nil {
			t.Fatal("no model and no error")
		}
	})
}
