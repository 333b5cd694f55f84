package wire

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/tensor"
)

// TestReaderPool: with a pool, a large payload handed back is read into
// again for the next frame of its size, holding that frame's bytes; small
// and odd-sized payloads are allocated as before; the digest still checks.
func TestReaderPool(t *testing.T) {
	var frames []Frame
	for step := range 3 {
		x := make([]float32, 2048) // 8 KiB: from the pool
		for i := range x {
			x[i] = float32(step*10000 + i)
		}
		d := NewDenseF32("w", x)
		d.Step = int64(step)
		frames = append(frames, d, &Dense{Name: "b", Step: int64(step), DType: U8, Shape: []int64{5}, Data: []byte{1, 2, 3, 4, byte(step)}})
	}
	b := encodeStream(t, frames...)
	var p tensor.Pool
	r := NewReader(bytes.NewReader(b), Limits{})
	r.SetPool(&p)
	var prev *byte
	for step := range 3 {
		f, err := r.Next()
		require.NoError(t, err)
		d := f.(*Dense)
		x, err := d.F32()
		require.NoError(t, err)
		for i, v := range x {
			require.Equal(t, float32(step*10000+i), v, "step %d element %d", step, i)
		}
		if tensor.ZeroCopy {
			if prev != nil {
				require.Same(t, prev, &d.Data[0], "step %d: the payload handed back was not reused", step)
			}
			prev = &d.Data[0]
			p.Put(tensor.Float32s(d.Data))
		}
		f, err = r.Next()
		require.NoError(t, err)
		require.Equal(t, []byte{1, 2, 3, 4, byte(step)}, f.(*Dense).Data)
	}
	_, err := r.Next()
	require.Error(t, err) // io.EOF after the end frame's digest matched
	require.ErrorIs(t, err, io.EOF)
}
