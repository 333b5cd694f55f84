package wire

import (
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
)

// Frame is one msgpack value of a stream. Its Type is the wire name ("t").
type Frame interface {
	Type() string
	// validate checks the frame's internal consistency (payload sizes
	// against shapes, CRCs); Reader and Writer both call it.
	validate(l *Limits) error
}

// SchemaVersion is the version of docs/wire.md this package implements.
const SchemaVersion = 1

// Header opens every stream.
type Header struct {
	Producer string
	Schema   int64
	Meta     map[string]string
}

// End closes every stream.
type End struct {
	// Count is the number of data frames between the header and the end.
	Count int64
	// XXH3 is the XXH3-64 of every bin value of those frames, in order.
	XXH3 uint64
}

// StepEnd marks the end of a step inside a stream: the producer has
// written every frame of step Step it will write. It is structure, like
// Header and End: no payload, not a data frame, not counted in End.Count.
// A filter answers a step (writes and flushes its output, then a StepEnd
// of its own) as soon as the step's StepEnd arrives (docs/wire.md, "Steps").
type StepEnd struct {
	Step int64
}

// Dense is a dense tensor.
type Dense struct {
	Name  string
	Step  int64
	Rank  int64
	DType DType
	Shape []int64
	// Data holds prod(Shape)·DType.Size() little-endian bytes.
	Data []byte
}

// Sparse formats.
const (
	COO    = "coo"
	Bitmap = "bitmap"
)

// Sparse is a sparse tensor: Nnz rows of Width elements of a dense tensor
// of shape Shape, which has prod(Shape)/Width rows. Element-level COO is
// Width 1; an embedding gradient is row-sparse with Width = Shape[last].
type Sparse struct {
	Name  string
	Step  int64
	Rank  int64
	DType DType
	Shape []int64
	Width int64
	// Format is COO or Bitmap.
	Format string
	// IType is the index type of COO (U32 or I64); empty for Bitmap.
	IType DType
	Nnz   int64
	// Indices: COO, Nnz row indices of IType; Bitmap, ceil(rows/8) bytes,
	// row i present iff bit i%8 of byte i/8 is set.
	Indices []byte
	// Values: Nnz·Width elements of DType, rows in index order.
	Values []byte
}

// Part is one output of a codec inside a Compressed frame.
type Part struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// Compressed is a compressed tensor.
type Compressed struct {
	Name   string
	Step   int64
	Rank   int64
	Algo   string
	Params map[string]any
	// DType and Shape are those of the original tensor.
	DType DType
	Shape []int64
	Parts []Part
}

// Event is a trace event or span; times are int64 nanoseconds.
type Event struct {
	Name   string
	Cat    string
	Ph     string
	Rank   int64
	PID    int64
	TID    int64
	Stream int64
	TS     int64
	Dur    int64
	Corr   int64
	Args   map[string]any
}

// Grad is one gradient of a timing model.
type Grad struct {
	Name  string
	Bytes int64
	Numel int64
	DType DType
	// ReadyNS is when the gradient is ready, relative to the start of the
	// backward pass.
	ReadyNS int64
	// ComputeNS is the backprop compute that produced it.
	ComputeNS int64
}

// CommSample is one measured communication.
type CommSample struct {
	Op    string
	Bytes int64
	NS    int64
	World int64
}

// Model is the per-iteration timing model the planners read.
type Model struct {
	Name       string
	World      int64
	Iters      int64
	IterNS     int64
	ForwardNS  int64
	BackwardNS int64
	// Grads are in backprop (ready) order.
	Grads []Grad
	Comm  []CommSample
	Meta  map[string]any
}

// Plan is a fusion, compression or placement plan.
type Plan struct {
	Kind string
	Algo string
	// Groups are inclusive index ranges [first, last].
	Groups        [][2]int64
	Items         []map[string]any
	PredictedNS   int64
	ProvenOptimal bool
	Meta          map[string]any
}

// Chunk is a piece of a checkpoint shard.
type Chunk struct {
	Job       string
	Iter      int64
	SrcRank   int64
	ReplicaOf int64
	Offset    int64
	Len       int64
	TotalLen  int64
	CRC32C    uint32
	Data      []byte
}

// Stats are measurements.
type Stats struct {
	Tool   string
	Name   string
	Step   int64
	Rank   int64
	Values map[string]float64
	Labels map[string]string
}

// Error is an error reported in-band.
type Error struct {
	Code  string
	Msg   string
	Rank  int64
	Frame int64
}

// Type names, as written in the "t" key.
const (
	TypeHeader     = "header"
	TypeEnd        = "end"
	TypeStepEnd    = "step_end"
	TypeDense      = "dense"
	TypeSparse     = "sparse"
	TypeCompressed = "compressed"
	TypeEvent      = "event"
	TypeModel      = "model"
	TypePlan       = "plan"
	TypeChunk      = "chunk"
	TypeStats      = "stats"
	TypeError      = "error"
)

// Type implements Frame.
func (*Header) Type() string { return TypeHeader }

// Type implements Frame.
func (*End) Type() string { return TypeEnd }

// Type implements Frame.
func (*StepEnd) Type() string { return TypeStepEnd }

// Type implements Frame.
func (*Dense) Type() string { return TypeDense }

// Type implements Frame.
func (*Sparse) Type() string { return TypeSparse }

// Type implements Frame.
func (*Compressed) Type() string { return TypeCompressed }

// Type implements Frame.
func (*Event) Type() string { return TypeEvent }

// Type implements Frame.
func (*Model) Type() string { return TypeModel }

// Type implements Frame.
func (*Plan) Type() string { return TypePlan }

// Type implements Frame.
func (*Chunk) Type() string { return TypeChunk }

// Type implements Frame.
func (*Stats) Type() string { return TypeStats }

// Type implements Frame.
func (*Error) Type() string { return TypeError }

// Error implements error, so an Error frame can be returned as one.
func (e *Error) Error() string {
	s := e.Code + ": " + e.Msg
	if e.Rank >= 0 {
		s = fmt.Sprintf("rank %d: %s", e.Rank, s)
	}
	return s
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the CRC32C (Castagnoli) of b, as Chunk frames carry it.
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Numel returns the number of elements of a shape, or an error if a
// dimension is negative or the product overflows int64.
func Numel(shape []int64) (int64, error) {
	n := int64(1)
	for i, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("dimension %d is negative (%d)", i, d)
		}
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		n = int64(lo)
	}
	return n, nil
}

// payloadSize returns numel·size with overflow checking.
func payloadSize(shape []int64, d DType) (int64, error) {
	n, err := Numel(shape)
	if err != nil {
		return 0, err
	}
	return mulSize(n, int64(d.Size()))
}

func mulSize(a, b int64) (int64, error) {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, errors.New("size overflows")
	}
	return int64(lo), nil
}

func checkShape(shape []int64, l *Limits) error {
	if len(shape) > l.MaxDims {
		return fieldErr("shape", fmt.Errorf("%d dimensions, limit %d", len(shape), l.MaxDims))
	}
	_, err := Numel(shape)
	return fieldErr("shape", err)
}

func checkLen(field string, got int, want int64) error {
	if int64(got) != want {
		return fieldErr(field, fmt.Errorf("%d bytes, want %d", got, want))
	}
	return nil
}

func (f *Header) validate(*Limits) error {
	if f.Schema < 1 || f.Schema > SchemaVersion {
		return fieldErr("schema", fmt.Errorf("schema %d, this reader knows 1..%d", f.Schema, SchemaVersion))
	}
	return nil
}

func (f *End) validate(*Limits) error {
	if f.Count < 0 {
		return fieldErr("count", fmt.Errorf("negative count %d", f.Count))
	}
	return nil
}

func (f *StepEnd) validate(*Limits) error {
	if f.Step < 0 {
		return fieldErr("step", fmt.Errorf("negative step %d", f.Step))
	}
	return nil
}

func (f *Dense) validate(l *Limits) error {
	if err := checkDType(f.DType); err != nil {
		return fieldErr("dtype", err)
	}
	if err := checkShape(f.Shape, l); err != nil {
		return err
	}
	want, err := payloadSize(f.Shape, f.DType)
	if err != nil {
		return fieldErr("shape", err)
	}
	if err := checkLen("data", len(f.Data), want); err != nil {
		return err
	}
	return fieldErr("data", checkBool(f.DType, f.Data))
}

// checkBool checks that a bool payload holds only 0 and 1 bytes.
func checkBool(d DType, b []byte) error {
	if d != Bool {
		return nil
	}
	for i, x := range b {
		if x > 1 {
			return fmt.Errorf("bool element %d is %d, want 0 or 1", i, x)
		}
	}
	return nil
}

// Rows returns the number of rows of the dense tensor (prod(Shape)/Width).
func (f *Sparse) Rows() int64 {
	n, _ := Numel(f.Shape)
	if f.Width <= 0 {
		return 0
	}
	return n / f.Width
}

func (f *Sparse) validate(l *Limits) error {
	if err := checkDType(f.DType); err != nil {
		return fieldErr("dtype", err)
	}
	if err := checkShape(f.Shape, l); err != nil {
		return err
	}
	numel, _ := Numel(f.Shape)
	if f.Width < 1 || numel%f.Width != 0 {
		return fieldErr("width", fmt.Errorf("width %d does not divide %d elements", f.Width, numel))
	}
	rows := numel / f.Width
	if f.Nnz < 0 || f.Nnz > rows {
		return fieldErr("nnz", fmt.Errorf("nnz %d outside [0, %d rows]", f.Nnz, rows))
	}
	vals, err := mulSize(f.Nnz, f.Width)
	if err == nil {
		vals, err = mulSize(vals, int64(f.DType.Size()))
	}
	if err != nil {
		return fieldErr("values", err)
	}
	if err := checkLen("values", len(f.Values), vals); err != nil {
		return err
	}
	if err := checkBool(f.DType, f.Values); err != nil {
		return fieldErr("values", err)
	}
	switch f.Format {
	case COO:
		if err := checkIType(f.IType); err != nil {
			return fieldErr("itype", err)
		}
		if err := checkLen("indices", len(f.Indices), f.Nnz*int64(f.IType.Size())); err != nil {
			return err
		}
		return fieldErr("indices", checkCOO(f.Indices, f.IType, rows))
	case Bitmap:
		if f.IType != "" {
			return fieldErr("itype", fmt.Errorf("itype %q with bitmap format, want \"\"", string(f.IType)))
		}
		if err := checkLen("indices", len(f.Indices), (rows+7)/8); err != nil {
			return err
		}
		return fieldErr("indices", checkBitmap(f.Indices, rows, f.Nnz))
	}
	return fieldErr("format", fmt.Errorf("format %q, want coo or bitmap", f.Format))
}

func checkCOO(idx []byte, it DType, rows int64) error {
	if it == U32 {
		for i := 0; i+4 <= len(idx); i += 4 {
			v := int64(uint32(idx[i]) | uint32(idx[i+1])<<8 | uint32(idx[i+2])<<16 | uint32(idx[i+3])<<24)
			if v >= rows {
				return fmt.Errorf("index %d is %d, outside [0, %d)", i/4, v, rows)
			}
		}
		return nil
	}
	for i := 0; i+8 <= len(idx); i += 8 {
		var u uint64
		for k := 7; k >= 0; k-- {
			u = u<<8 | uint64(idx[i+k])
		}
		if v := int64(u); v < 0 || v >= rows {
			return fmt.Errorf("index %d is %d, outside [0, %d)", i/8, v, rows)
		}
	}
	return nil
}

func checkBitmap(bm []byte, rows, nnz int64) error {
	var n int64
	for _, b := range bm {
		n += int64(bits.OnesCount8(b))
	}
	if n != nnz {
		return fmt.Errorf("%d bits set, nnz is %d", n, nnz)
	}
	if r := rows % 8; r != 0 && len(bm) > 0 && bm[len(bm)-1]>>r != 0 {
		return fmt.Errorf("bits set past row %d", rows)
	}
	return nil
}

func (f *Compressed) validate(l *Limits) error {
	if f.Algo == "" {
		return fieldErr("algo", errors.New("empty"))
	}
	if err := checkDType(f.DType); err != nil {
		return fieldErr("dtype", err)
	}
	if err := checkShape(f.Shape, l); err != nil {
		return err
	}
	for i := range f.Parts {
		p := &f.Parts[i]
		field := fmt.Sprintf("parts[%d]", i)
		if err := checkDType(p.DType); err != nil {
			return fieldErr(field+".dtype", err)
		}
		if len(p.Shape) > l.MaxDims {
			return fieldErr(field+".shape", fmt.Errorf("%d dimensions, limit %d", len(p.Shape), l.MaxDims))
		}
		want, err := payloadSize(p.Shape, p.DType)
		if err != nil {
			return fieldErr(field+".shape", err)
		}
		if err := checkLen(field+".data", len(p.Data), want); err != nil {
			return err
		}
		if err := checkBool(p.DType, p.Data); err != nil {
			return fieldErr(field+".data", err)
		}
	}
	return nil
}

func (f *Event) validate(*Limits) error {
	if f.Dur < 0 {
		return fieldErr("dur", fmt.Errorf("negative duration %d", f.Dur))
	}
	return nil
}

func (f *Model) validate(*Limits) error { return nil }

func (f *Plan) validate(*Limits) error {
	for i, g := range f.Groups {
		if g[0] < 0 || g[1] < g[0] {
			return fieldErr("groups", fmt.Errorf("group %d is [%d, %d]", i, g[0], g[1]))
		}
	}
	return nil
}

func (f *Chunk) validate(*Limits) error {
	if err := checkLen("data", len(f.Data), f.Len); err != nil {
		return err
	}
	if f.Offset < 0 || f.Len < 0 || f.TotalLen < 0 || f.Offset > f.TotalLen || f.Len > f.TotalLen-f.Offset {
		return fieldErr("offset", fmt.Errorf("offset %d + len %d outside total_len %d", f.Offset, f.Len, f.TotalLen))
	}
	if c := CRC32C(f.Data); c != f.CRC32C {
		return fieldErr("crc32c", fmt.Errorf("data has CRC32C %08x, frame says %08x", c, f.CRC32C))
	}
	return nil
}

func (f *Stats) validate(*Limits) error { return nil }

func (f *Error) validate(*Limits) error { return nil }
