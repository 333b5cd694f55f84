package wire

import (
	"fmt"
	"unsafe"

	"trainwire.dev/lib/tensor"
)

// NewDenseF32 returns a dense f32 frame of x with the given shape (1-D when
// shape is empty). On little-endian hosts Data is a view of x, not a copy:
// the Writer then sends x's memory as is.
func NewDenseF32(name string, x []float32, shape ...int64) *Dense {
	if len(shape) == 0 {
		shape = []int64{int64(len(x))}
	}
	data := tensor.Bytes(x)
	if data == nil {
		data = []byte{}
	}
	return &Dense{Name: name, Rank: -1, DType: F32, Shape: shape, Data: data}
}

// F32 returns the frame's elements as float32: a view of Data on
// little-endian hosts (copied first if Data is not 4-byte aligned), a
// decoded copy elsewhere.
func (f *Dense) F32() ([]float32, error) {
	if f.DType != F32 {
		return nil, fmt.Errorf("wire: tensor %q is %s, want f32", f.Name, f.DType)
	}
	if len(f.Data)%4 != 0 {
		return nil, fmt.Errorf("wire: tensor %q has %d bytes, not a whole number of f32", f.Name, len(f.Data))
	}
	if len(f.Data) > 0 && uintptr(unsafe.Pointer(&f.Data[0]))%4 != 0 {
		x := tensor.Alloc(len(f.Data) / 4)
		tensor.DecodeLE(x, f.Data)
		return x, nil
	}
	return tensor.Float32s(f.Data), nil
}
