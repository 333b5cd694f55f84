package main

import (
	"bytes"
	"testing"

	"trainwire.dev/lib/wire"
)

// FuzzToTensor feeds arbitrary streams to the frame → tensor conversion
// sync and ref use: it must reject what it cannot use, never panic, and
// what it accepts must be a valid row-sparse tensor.
func FuzzToTensor(f *testing.F) {
	var seed bytes.Buffer
	w := wire.NewWriter(&seed, "fuzz")
	_ = w.Write(&wire.Sparse{Name: "e", DType: wire.F32, Shape: []int64{4, 2}, Width: 2, Format: wire.COO, IType: wire.U32, Nnz: 2,
		Indices: []byte{3, 0, 0, 0, 1, 0, 0, 0}, Values: make([]byte, 16)})
	_ = w.Write(wire.NewDenseF32("d", []float32{0, 1, 0, 2}, 2, 2))
	_ = w.Close()
	f.Add(seed.Bytes(), 0)
	f.Add(seed.Bytes(), 1)
	f.Fuzz(func(t *testing.T, b []byte, rowWidth int) {
		if rowWidth < 0 || rowWidth > 64 {
			return
		}
		rd := wire.NewReader(bytes.NewReader(b), wire.Limits{MaxPayload: 1 << 16, MaxElems: 1 << 10})
		for range 8 {
			fr, err := rd.Next()
			if err != nil {
				return
			}
			tt, _, err := toTensor(fr, rowWidth)
			if err != nil {
				continue
			}
			if err := tt.Check(); err != nil {
				t.Fatalf("accepted an invalid tensor: %v", err)
			}
		}
	})
}
