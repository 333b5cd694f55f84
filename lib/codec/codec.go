package codec

import (
	"errors"
	"fmt"
	"math"
	"sort"

	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// Options are the parameters of every codec; each codec reads the ones it
// documents (see Infos) and ignores the rest. The zero value of a field
// means its default.
type Options struct {
	// Ratio is the density ρ of the sparsifiers (topk, mstopk, randomk, dgc):
	// k = ceil(ρ·d) clamped to [1, d]. Default 0.01.
	Ratio float64
	// K, when positive, fixes k instead of Ratio (clamped to d).
	K int64
	// Seed keys every random draw together with the tensor's name and step.
	Seed uint64
	// Levels is QSGD's s (1..32767). Default 64. Up to 127 the codes are
	// int8; above, int16 (the "wide" encoding).
	Levels int64
	// DGCWarmup is dgc's warm-up: steps per stage of the density schedule
	// 25%, 6.25%, 1.5625%, 0.390625% before the codec's own ratio; 0
	// (default) is off.
	DGCWarmup int64
	// Clip is TernGrad's gradient clipping factor c: before ternarising,
	// |x| is bounded by c·σ (σ the standard deviation of the tensor's
	// elements); TernGrad uses 2.5. 0 (default) turns clipping off.
	Clip float64
	// Threshold is threshold's τ: elements with |x| ≥ τ are sent. Default 0.01.
	Threshold float64
	// Samplings is MSTopK's N, the threshold probes. Default 30.
	Samplings int64
	// RowSelector is hitopk's row selection: SelectorL2 (exact, the
	// default) or SelectorMSTopK.
	RowSelector string
	// Rank is PowerSGD's r. Default 1.
	Rank int64
	// Momentum is Signum's β. Default 0.9.
	Momentum float64
	// Unbiased makes randomk scale its values by d/k, so that the decoded
	// tensor is an unbiased estimate of the input.
	Unbiased bool
	// Workers bounds the goroutines of the parallel kernels; 0 means
	// GOMAXPROCS. Results never depend on it.
	Workers int
}

// Input is one tensor to encode.
type Input struct {
	// Name and Step identify the tensor; seeded codecs key their random
	// draws with them.
	Name string
	Step int64
	Rank int64
	// Shape is the tensor's shape; nil means 1-D.
	Shape []int64
	// Data holds prod(Shape) elements.
	Data []float32
	// State holds the codec's own per-tensor state (Signum's momentum,
	// PowerSGD's warm-start Q); it may be nil for stateless codecs.
	State *State
}

// Codec is one compression algorithm with fixed parameters.
type Codec interface {
	// Algo is the codec's name, as written in a frame's "algo".
	Algo() string
	// Params are the canonical parameters written into every frame.
	Params() map[string]any
	// Size returns the payload bytes (the sum of the parts' data) for a
	// tensor of this shape, or -1 when it depends on the data (threshold).
	Size(shape []int64) int64
	// Encode compresses in. It does not retain in.Data.
	Encode(in Input) (*wire.Compressed, error)
	// Decode writes the dense tensor a frame of this codec stands for into
	// dst, which holds exactly prod(f.Shape) elements. The frame must have
	// been checked by Check.
	decode(f *wire.Compressed, dst []float32) error
	// check validates a frame's parts against the codec's parameters.
	check(f *wire.Compressed) error
}

// Info describes an algorithm for `compressor list`.
type Info struct {
	Algo string
	// Kind is sparsification, quantization or low-rank.
	Kind string
	// Params names the Options the codec reads, with their defaults.
	Params map[string]string
	// SizeFormula is the payload size in bytes for d elements.
	SizeFormula string
	// Summable says whether frames can be added without decoding, and how.
	Summable string
	// Doc is a one-line description.
	Doc string
}

type factory struct {
	info Info
	// fromOptions builds the codec from command-line options.
	fromOptions func(o Options) (Codec, error)
	// fromParams builds the codec from a frame's params.
	fromParams func(p map[string]any) (Codec, error)
}

var registry = map[string]factory{}

func register(f factory) { registry[f.info.Algo] = f }

// Algos returns every algorithm's name, sorted.
func Algos() []string {
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Infos returns every algorithm's description, sorted by name.
func Infos() []Info {
	var out []Info
	for _, a := range Algos() {
		out = append(out, registry[a].info)
	}
	return out
}

// New returns the codec algo with options o.
func New(algo string, o Options) (Codec, error) {
	f, ok := registry[algo]
	if !ok {
		return nil, fmt.Errorf("codec: unknown algorithm %q (known: %v)", algo, Algos())
	}
	if o.Ratio == 0 {
		o.Ratio = 0.01
	}
	if !(o.Ratio > 0 && o.Ratio <= 1) {
		return nil, fmt.Errorf("codec: %s: ratio %v not in (0, 1]", algo, o.Ratio)
	}
	if o.K < 0 {
		return nil, fmt.Errorf("codec: %s: k %d is negative", algo, o.K)
	}
	return f.fromOptions(o)
}

// FromFrame returns the codec that wrote f, built from f's algo and params,
// after checking that the frame is complete and consistent: the algorithm is
// known, the dtype is f32, and every part has the name, dtype, shape and
// byte length the codec's encoding requires.
func FromFrame(f *wire.Compressed) (Codec, error) {
	fac, ok := registry[f.Algo]
	if !ok {
		return nil, &FrameError{Name: f.Name, Algo: f.Algo, Err: fmt.Errorf("unknown algorithm (known: %v)", Algos())}
	}
	if f.DType != wire.F32 {
		return nil, &FrameError{Name: f.Name, Algo: f.Algo, Err: fmt.Errorf("dtype %q, want f32", f.DType)}
	}
	if _, err := numel(f.Shape); err != nil {
		return nil, &FrameError{Name: f.Name, Algo: f.Algo, Err: err}
	}
	c, err := fac.fromParams(f.Params)
	if err != nil {
		return nil, &FrameError{Name: f.Name, Algo: f.Algo, Err: err}
	}
	if err := c.check(f); err != nil {
		return nil, &FrameError{Name: f.Name, Algo: f.Algo, Err: err}
	}
	return c, nil
}

// Decode decodes any compressed frame into dst (which must hold exactly
// prod(f.Shape) elements; nil allocates it) and returns dst. It trusts the
// frame's shape: for frames from the wire use DecodeLimit.
func Decode(f *wire.Compressed, dst []float32) ([]float32, error) {
	return DecodeLimit(f, dst, math.MaxInt64)
}

// DecodeLimit is Decode for untrusted frames: a sparsifier's frame of a
// few bytes can name a shape of billions of elements, so the dense output
// (4 bytes an element) must fit maxBytes — tools pass their --max-payload,
// the bound of every tensor on the wire — before anything is allocated.
func DecodeLimit(f *wire.Compressed, dst []float32, maxBytes int64) ([]float32, error) {
	c, err := FromFrame(f)
	if err != nil {
		return nil, err
	}
	n, _ := numel(f.Shape)
	if dst == nil {
		if n > maxBytes/4 {
			return nil, &FrameError{Name: f.Name, Algo: f.Algo,
				Err: fmt.Errorf("shape %v decodes to %d bytes, over the limit of %d (--max-payload)", f.Shape, 4*n, maxBytes)}
		}
		dst = tensor.Alloc(int(n))
	}
	if int64(len(dst)) != n {
		return nil, fmt.Errorf("codec: decode %q: dst has %d elements, frame %d", f.Name, len(dst), n)
	}
	if err := c.decode(f, dst); err != nil {
		return nil, &FrameError{Name: f.Name, Algo: f.Algo, Err: err}
	}
	return dst, nil
}

// FrameError is a compressed frame that cannot be decoded: wrong
// algorithm, parameters, parts or lengths. Tools exit with 2 on it.
type FrameError struct {
	Name, Algo string
	Err        error
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("codec: frame %q (algo %q): %v", e.Name, e.Algo, e.Err)
}

// Unwrap returns the underlying error.
func (e *FrameError) Unwrap() error { return e.Err }

// ExitCode makes tools exit with 2 (bad input).
func (e *FrameError) ExitCode() int { return exit.BadInput }

// NonFiniteError is an input tensor holding NaN or ±Inf, which every
// encoder rejects. Tools exit with 2 on it.
type NonFiniteError struct {
	Name  string
	Index int
	Value float32
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("codec: tensor %q: element %d is %v: NaN and Inf are rejected", e.Name, e.Index, e.Value)
}

// ExitCode makes tools exit with 2 (bad input).
func (e *NonFiniteError) ExitCode() int { return exit.BadInput }

// CheckFinite returns a *NonFiniteError naming the first NaN or ±Inf of x.
func CheckFinite(name string, x []float32) error {
	i := firstNonFinite(x)
	if i < 0 {
		return nil
	}
	return &NonFiniteError{Name: name, Index: i, Value: x[i]}
}

func firstNonFinite(x []float32) int {
	// The common case first: the largest magnitude key, in parallel and
	// vectorised, is below +Inf's.
	if maxMag(x, 0) < 0x7f800000 {
		return -1
	}
	// Branch-free scan in blocks; the exponent field is all ones for NaN/Inf.
	const blk = 1024
	for s := 0; s < len(x); s += blk {
		e := min(s+blk, len(x))
		var bad uint32
		for _, v := range x[s:e] {
			b := math.Float32bits(v) & 0x7f800000
			bad |= (b + 0x00800000) & 0x80000000 // carry into bit 31 iff exponent is 0xff
		}
		if bad != 0 {
			for i := s; i < e; i++ {
				if math.Float32bits(x[i])&0x7f800000 == 0x7f800000 {
					return i
				}
			}
		}
	}
	return -1
}

// ErrWrongAlgo is wrapped when a frame of one algorithm is given where
// another is expected.
var ErrWrongAlgo = errors.New("wrong algorithm")

func numel(shape []int64) (int64, error) {
	n, err := wire.Numel(shape)
	if err != nil {
		return 0, err
	}
	if n > math.MaxUint32 {
		return 0, fmt.Errorf("%d elements: codecs take at most 2^32-1", n)
	}
	return n, nil
}

func shapeOrFlat(shape []int64, n int) []int64 {
	if shape == nil {
		return []int64{int64(n)}
	}
	return append([]int64(nil), shape...)
}

// frame assembles a compressed frame for in.
func frame(c Codec, in Input, parts ...wire.Part) *wire.Compressed {
	return &wire.Compressed{
		Name: in.Name, Step: in.Step, Rank: in.Rank,
		Algo: c.Algo(), Params: c.Params(),
		DType: wire.F32, Shape: shapeOrFlat(in.Shape, len(in.Data)),
		Parts: parts,
	}
}

func checkInput(in Input) error {
	if err := checkShape(in); err != nil {
		return err
	}
	return CheckFinite(in.Name, in.Data)
}

// checkShape checks in's shape against its data, not its values.
func checkShape(in Input) error {
	if in.Shape != nil {
		n, err := numel(in.Shape)
		if err != nil {
			return fmt.Errorf("codec: tensor %q: %w", in.Name, err)
		}
		if n != int64(len(in.Data)) {
			return fmt.Errorf("codec: tensor %q: shape %v holds %d elements, data %d", in.Name, in.Shape, n, len(in.Data))
		}
	} else if int64(len(in.Data)) > math.MaxUint32 {
		return fmt.Errorf("codec: tensor %q: %d elements: codecs take at most 2^32-1", in.Name, len(in.Data))
	}
	return nil
}

// partSpec is what a codec expects of one part.
type partSpec struct {
	name  string
	dtype wire.DType
	n     int64 // elements
}

// checkParts checks a frame's parts against specs exactly.
func checkParts(f *wire.Compressed, specs ...partSpec) error {
	if len(f.Parts) != len(specs) {
		return fmt.Errorf("%d parts, want %d (%s)", len(f.Parts), len(specs), partNames(specs))
	}
	for i, s := range specs {
		p := f.Parts[i]
		if p.Name != s.name {
			return fmt.Errorf("part %d is %q, want %q", i, p.Name, s.name)
		}
		if p.DType != s.dtype {
			return fmt.Errorf("part %q: dtype %q, want %q", p.Name, p.DType, s.dtype)
		}
		pn, err := wire.Numel(p.Shape)
		if err != nil {
			return fmt.Errorf("part %q: %w", p.Name, err)
		}
		if pn != s.n {
			return fmt.Errorf("part %q: %d elements, want %d", p.Name, pn, s.n)
		}
		if int64(len(p.Data)) != s.n*int64(s.dtype.Size()) {
			return fmt.Errorf("part %q: %d bytes, want %d", p.Name, len(p.Data), s.n*int64(s.dtype.Size()))
		}
	}
	return nil
}

func partNames(specs []partSpec) string {
	s := ""
	for i, p := range specs {
		if i > 0 {
			s += ", "
		}
		s += p.name
	}
	return s
}

func part(name string, dt wire.DType, data []byte, shape ...int64) wire.Part {
	return wire.Part{Name: name, DType: dt, Shape: shape, Data: data}
}

// Param readers for frames from the wire: ints arrive as int64 (or uint64
// above MaxInt64), floats as float64.

func pInt(p map[string]any, key string, lo, hi int64) (int64, error) {
	v, ok := p[key]
	if !ok {
		return 0, fmt.Errorf("params: missing %q", key)
	}
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case int:
		n = int64(x)
	case uint64:
		if x > math.MaxInt64 {
			return 0, fmt.Errorf("params: %q = %d out of range", key, x)
		}
		n = int64(x)
	default:
		return 0, fmt.Errorf("params: %q is %T, want an integer", key, v)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("params: %q = %d not in [%d, %d]", key, n, lo, hi)
	}
	return n, nil
}

func pUint(p map[string]any, key string) (uint64, error) {
	v, ok := p[key]
	if !ok {
		return 0, fmt.Errorf("params: missing %q", key)
	}
	switch x := v.(type) {
	case int64:
		return uint64(x), nil // seeds above MaxInt64 travel as uint64; below as int64
	case int:
		return uint64(x), nil
	case uint64:
		return x, nil
	}
	return 0, fmt.Errorf("params: %q is %T, want an integer", key, v)
}

func pFloat(p map[string]any, key string) (float64, error) {
	v, ok := p[key]
	if !ok {
		return 0, fmt.Errorf("params: missing %q", key)
	}
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return 0, fmt.Errorf("params: %q = %v is not finite", key, x)
		}
		return x, nil
	case int64:
		return float64(x), nil
	}
	return 0, fmt.Errorf("params: %q is %T, want a number", key, v)
}

func pBool(p map[string]any, key string) (bool, error) {
	v, ok := p[key]
	if !ok {
		return false, fmt.Errorf("params: missing %q", key)
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("params: %q is %T, want a bool", key, v)
	}
	return b, nil
}

// seedParam writes a seed so that it reads back with pUint.
func seedParam(s uint64) any {
	if s > math.MaxInt64 {
		return s
	}
	return int64(s)
}

// KFor returns the number of elements a sparsifier keeps of d: K when
// positive, else ceil(ratio·d) (with a 1e-9 slack so that 0.07·100 is 7),
// clamped to [1, d]; 0 when d is 0.
func KFor(d int64, ratio float64, k int64) int64 {
	if d == 0 {
		return 0
	}
	if k <= 0 {
		k = int64(math.Ceil(ratio*float64(d) - 1e-9))
	}
	return min(max(k, 1), d)
}
