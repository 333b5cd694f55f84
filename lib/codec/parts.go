package codec

import (
	"fmt"
	"math"
	"strings"

	"trainwire.dev/lib/wire"
)

// Partitioned ("divisible") compression, for aggregation by Alltoall
// (seed-espresso.md §7a item 12): a tensor of d elements is cut into P
// chunks of m = ⌈d/P⌉ elements — the last chunk zero-padded to m, chunks
// wholly past d all zeros — and each chunk is compressed as a tensor of its
// own, named PartName(name, c, P). So its indices are chunk-local, its
// random streams and error-feedback state are its own, and every chunk's
// payload has the same size (a pure function of m and the codec's
// parameters). Rank c of an Alltoall receives chunk c from every rank,
// sums them as the codec allows and decodes its slice of the tensor; Join
// puts decoded chunks back together. Codecs that look at the whole tensor
// (topk, the scaled quantizers, ...) see only their chunk: top-k of each
// chunk is not the global top-k.

// Frame parameters that mark a chunk (besides the codec's own).
const (
	ParamPart        = "part"         // chunk index c, in [0, P)
	ParamParts       = "parts"        // P
	ParamTensorShape = "tensor_shape" // shape of the whole tensor
)

// MaxParts bounds P.
const MaxParts = 1 << 16

// PartLen returns m = ⌈d/P⌉, the length of every chunk.
func PartLen(d int64, P int) int64 { return (d + int64(P) - 1) / int64(P) }

// PartName names chunk c of P of tensor name: "name[c/P]".
func PartName(name string, c, P int) string { return fmt.Sprintf("%s[%d/%d]", name, c, P) }

// Split cuts in into its P chunk inputs (their data copied, zero-padded to
// m = PartLen). Step and rank are kept; State is not (each chunk has its
// own).
func Split(in Input, P int) ([]Input, error) {
	if P < 1 || P > MaxParts {
		return nil, fmt.Errorf("codec: tensor %q: %d parts, want 1 to %d", in.Name, P, MaxParts)
	}
	if err := checkShape(in); err != nil {
		return nil, err
	}
	d := int64(len(in.Data))
	m := PartLen(d, P)
	out := make([]Input, P)
	for c := range P {
		x := make([]float32, m)
		if lo := int64(c) * m; lo < d {
			copy(x, in.Data[lo:min(lo+m, d)])
		}
		out[c] = Input{Name: PartName(in.Name, c, P), Step: in.Step, Rank: in.Rank, Shape: []int64{m}, Data: x}
	}
	return out, nil
}

// MarkPart records on f, the frame of chunk c of P, which chunk it is and
// the shape of the whole tensor.
func MarkPart(f *wire.Compressed, c, P int, shape []int64) {
	if f.Params == nil {
		f.Params = map[string]any{}
	}
	f.Params[ParamPart] = int64(c)
	f.Params[ParamParts] = int64(P)
	f.Params[ParamTensorShape] = append([]int64(nil), shape...)
}

// PartInfo is what a chunk's frame says of itself.
type PartInfo struct {
	Base        string  // the tensor's name
	Part, Parts int     // c and P
	Shape       []int64 // the whole tensor's shape
	Numel       int64   // its elements, d
}

// PartOf reports whether f is a chunk of a partitioned tensor and, if so,
// which one. A frame with some but not all of the marks, or marks that
// disagree with its name or shape, is an error.
func PartOf(f *wire.Compressed) (PartInfo, bool, error) {
	_, hasPart := f.Params[ParamPart]
	_, hasParts := f.Params[ParamParts]
	_, hasShape := f.Params[ParamTensorShape]
	if !hasPart && !hasParts && !hasShape {
		return PartInfo{}, false, nil
	}
	bad := func(format string, a ...any) (PartInfo, bool, error) {
		return PartInfo{}, true, &FrameError{Name: f.Name, Algo: f.Algo, Err: fmt.Errorf("partitioned frame: "+format, a...)}
	}
	P, err := pInt(f.Params, ParamParts, 1, MaxParts)
	if err != nil {
		return bad("%v", err)
	}
	c, err := pInt(f.Params, ParamPart, 0, P-1)
	if err != nil {
		return bad("%v", err)
	}
	shape, err := pShape(f.Params[ParamTensorShape])
	if err != nil {
		return bad("%s: %v", ParamTensorShape, err)
	}
	d, err := numel(shape)
	if err != nil {
		return bad("%s %v: %v", ParamTensorShape, shape, err)
	}
	suffix := fmt.Sprintf("[%d/%d]", c, P)
	base, ok := strings.CutSuffix(f.Name, suffix)
	if !ok {
		return bad("name does not end in %s", suffix)
	}
	if n, err := numel(f.Shape); err != nil || n != PartLen(d, int(P)) {
		return bad("chunk shape %v, want [%d] (⌈%d/%d⌉)", f.Shape, PartLen(d, int(P)), d, P)
	}
	return PartInfo{Base: base, Part: int(c), Parts: int(P), Shape: shape, Numel: d}, true, nil
}

// pShape reads a shape parameter: an array of non-negative integers, as
// the wire decodes it ([]any of int64 or uint64) or as MarkPart sets it.
func pShape(v any) ([]int64, error) {
	var items []any
	switch s := v.(type) {
	case []int64:
		for _, x := range s {
			items = append(items, x)
		}
	case []any:
		items = s
	default:
		return nil, fmt.Errorf("%T, want an array of integers", v)
	}
	if len(items) == 0 || len(items) > 64 {
		return nil, fmt.Errorf("%d dimensions, want 1 to 64", len(items))
	}
	out := make([]int64, len(items))
	for i, e := range items {
		switch x := e.(type) {
		case int64:
			out[i] = x
		case int:
			out[i] = int64(x)
		case uint64:
			if x > math.MaxInt64 {
				return nil, fmt.Errorf("dimension %d out of range", x)
			}
			out[i] = int64(x)
		default:
			return nil, fmt.Errorf("dimension %v is %T, want an integer", e, e)
		}
		if out[i] < 0 {
			return nil, fmt.Errorf("negative dimension %d", out[i])
		}
	}
	return out, nil
}

// Join writes decoded chunk c (m = ⌈d/P⌉ elements) into its place in dst
// (d elements), dropping the padding past d.
func Join(dst []float32, info PartInfo, chunk []float32) error {
	m := PartLen(info.Numel, info.Parts)
	if int64(len(dst)) != info.Numel || int64(len(chunk)) != m {
		return fmt.Errorf("codec: join %q part %d/%d: %d-element chunk into %d elements, want %d into %d",
			info.Base, info.Part, info.Parts, len(chunk), len(dst), m, info.Numel)
	}
	lo := int64(info.Part) * m
	if lo < info.Numel {
		copy(dst[lo:min(lo+m, info.Numel)], chunk)
	}
	return nil
}
