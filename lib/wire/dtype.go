package wire

import "fmt"

// DType is the element type of a payload, as named on the wire.
type DType string

// The element types of schema 1.
const (
	F32  DType = "f32"
	F64  DType = "f64"
	F16  DType = "f16"
	BF16 DType = "bf16"
	I8   DType = "i8"
	U8   DType = "u8"
	I16  DType = "i16"
	I32  DType = "i32"
	I64  DType = "i64"
	U32  DType = "u32"
	U64  DType = "u64"
	Bool DType = "bool"
)

// Size returns the bytes per element, or 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case I8, U8, Bool:
		return 1
	case F16, BF16, I16:
		return 2
	case F32, I32, U32:
		return 4
	case F64, I64, U64:
		return 8
	}
	return 0
}

// Valid reports whether d is a dtype of schema 1.
func (d DType) Valid() bool { return d.Size() != 0 }

func checkDType(d DType) error {
	if !d.Valid() {
		return fmt.Errorf("unknown dtype %q", string(d))
	}
	return nil
}

// checkIType checks an index type of a COO sparse frame.
func checkIType(d DType) error {
	if d != U32 && d != I64 {
		return fmt.Errorf("index type %q, want u32 or i64", string(d))
	}
	return nil
}
