package codec

import (
	"bytes"
	"trainwire.dev/lib/rng"

	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"trainwire.dev/lib/wire"
)

// ---- sign family: signsgd, efsignsgd, signum, onebit ----

func unpackParallel(dst []float32, bits []byte, one, zero float32) {
	cs := chunks(len(dst), workers(0, len(dst)), 8)
	parallel(cs, func(_ int, lo, hi int) { unpackSelect(dst[lo:hi], bits[lo/8:], one, zero) })
}

func checkBits(f *wire.Compressed, name string, planes int64, extra ...partSpec) error {
	d, _ := numel(f.Shape)
	nb := packedLen(d)
	specs := append([]partSpec{{name, wire.U8, planes * nb}}, extra...)
	if err := checkParts(f, specs...); err != nil {
		return err
	}
	b := f.Parts[0].Data
	for p := int64(0); p < planes; p++ {
		if !checkPadding(b[p*nb:(p+1)*nb], d) {
			return fmt.Errorf("part %q: padding bits past element %d are not zero", name, d)
		}
	}
	return nil
}

type signsgd struct{ workers int }

func (c *signsgd) Algo() string             { return "signsgd" }
func (c *signsgd) Params() map[string]any   { return map[string]any{} }
func (c *signsgd) Size(shape []int64) int64 { d, _ := numel(shape); return packedLen(d) }
func (c *signsgd) Encode(in Input) (*wire.Compressed, error) {
	if err := checkShape(in); err != nil {
		return nil, err
	}
	b, ok := signBits(in.Data, c.workers)
	if !ok {
		return nil, CheckFinite(in.Name, in.Data)
	}
	return frame(c, in, part("bits", wire.U8, b, int64(len(b)))), nil
}
func (c *signsgd) check(f *wire.Compressed) error { return checkBits(f, "bits", 1) }
func (c *signsgd) decode(f *wire.Compressed, dst []float32) error {
	unpackParallel(dst, f.Parts[0].Data, 1, -1)
	return nil
}

// signum sends the sign of its momentum m ← β·m + (1−β)·x (slot "m").
type signum struct {
	beta    float64
	workers int
}

func (c *signum) Algo() string             { return "signum" }
func (c *signum) Params() map[string]any   { return map[string]any{"momentum": c.beta} }
func (c *signum) Size(shape []int64) int64 { d, _ := numel(shape); return packedLen(d) }
func (c *signum) Encode(in Input) (*wire.Compressed, error) {
	if err := checkInput(in); err != nil {
		return nil, err
	}
	st := in.State
	if st == nil {
		st = &State{}
	}
	m := st.Slot("m", len(in.Data))
	b, a := float32(c.beta), float32(1-c.beta)
	bits := allocBytes(int(packedLen(int64(len(m)))))
	cs := chunks(len(m), workers(c.workers, len(m)), 8)
	parallel(cs, func(_ int, lo, hi int) { signumInto(bits[lo/8:], m[lo:hi], in.Data[lo:hi], b, a) })
	return frame(c, in, part("bits", wire.U8, bits, int64(len(bits)))), nil
}
func (c *signum) check(f *wire.Compressed) error { return checkBits(f, "bits", 1) }
func (c *signum) decode(f *wire.Compressed, dst []float32) error {
	unpackParallel(dst, f.Parts[0].Data, 1, -1)
	return nil
}

// signumInto sets m = float32(b·m) + float32(a·x) element-wise and packs
// 1 − signbit(m) into dst: signumAVX2 for the leading multiple of 32
// where the CPU has AVX2, signumGo for the rest (and everything
// elsewhere).
func signumInto(dst []byte, m, x []float32, b, a float32) {
	k := 0
	if haveAVX2 && len(m) >= 32 {
		k = len(m) / 32 * 32
		signumAVX2(&dst[0], &m[0], &x[0], k, b, a)
	}
	signumGo(dst[k/8:], m[k:], x[k:], b, a)
}

// signumGo is signumInto in pure Go. The conversions round each product
// to float32, so that no compiler fuses them into an FMA.
func signumGo(dst []byte, m, x []float32, b, a float32) {
	x = x[:len(m)]
	for i, v := range x {
		m[i] = float32(b*m[i]) + float32(a*v)
	}
	signBitsGo(dst, m)
}

// efsignsgd: bits (x ≥ 0) and scale = mean |x| (f32); decodes to ±scale.
type efsignsgd struct{ workers int }

func (c *efsignsgd) Algo() string             { return "efsignsgd" }
func (c *efsignsgd) Params() map[string]any   { return map[string]any{} }
func (c *efsignsgd) Size(shape []int64) int64 { d, _ := numel(shape); return packedLen(d) + 4 }
func (c *efsignsgd) Encode(in Input) (*wire.Compressed, error) {
	if err := checkShape(in); err != nil {
		return nil, err
	}
	x := in.Data
	b, ok, _, s := signBlocks(x, c.workers)
	if !ok {
		return nil, CheckFinite(in.Name, x)
	}
	scale := float32(0)
	if len(x) > 0 {
		scale = float32(s / float64(len(x)))
	}
	return frame(c, in, part("bits", wire.U8, b, int64(len(b))), part("scale", wire.F32, f32le(scale), 1)), nil
}
func (c *efsignsgd) check(f *wire.Compressed) error {
	return checkBits(f, "bits", 1, partSpec{"scale", wire.F32, 1})
}
func (c *efsignsgd) decode(f *wire.Compressed, dst []float32) error {
	s := f32at(f.Parts[1].Data, 0)
	unpackParallel(dst, f.Parts[0].Data, s, -s)
	return nil
}

// signBits packs 1 − signbit(x) for every element, in parallel chunks
// of whole bytes; false if x holds a non-finite value.
func signBits(x []float32, nworkers int) ([]byte, bool) {
	b := allocBytes(int(packedLen(int64(len(x)))))
	cs := chunks(len(x), workers(nworkers, len(x)), 8)
	oks := make([]bool, len(cs))
	parallel(cs, func(ci int, lo, hi int) { oks[ci] = signBitsInto(b[lo/8:], x[lo:hi]) })
	for _, ok := range oks {
		if !ok {
			return b, false
		}
	}
	return b, true
}

// sumSquaresGo sums x² in float64: even and odd elements in two chains,
// added at the end (sumSquaresBlocks runs it per block).
func sumSquaresGo(x []float32) float64 {
	var a, b float64
	i := 0
	for ; i+2 <= len(x); i += 2 {
		a += float64(x[i]) * float64(x[i])
		b += float64(x[i+1]) * float64(x[i+1])
	}
	for ; i < len(x); i++ {
		a += float64(x[i]) * float64(x[i])
	}
	return a + b
}

// sumAbs sums |x| in float64, four accumulators.
func sumAbs(x []float32) float64 {
	var a, b, c, d float64
	i := 0
	for ; i+4 <= len(x); i += 4 {
		a += float64(math.Float32frombits(math.Float32bits(x[i]) & 0x7fffffff))
		b += float64(math.Float32frombits(math.Float32bits(x[i+1]) & 0x7fffffff))
		c += float64(math.Float32frombits(math.Float32bits(x[i+2]) & 0x7fffffff))
		d += float64(math.Float32frombits(math.Float32bits(x[i+3]) & 0x7fffffff))
	}
	for ; i < len(x); i++ {
		a += math.Abs(float64(x[i]))
	}
	return (a + b) + (c + d)
}

// onebit (Seide'14): bit = (x < 0), means = [mean of the negatives, mean of
// the non-negatives] (0 for an empty set); decodes to means[bit == 0].
type onebit struct{ workers int }

func (c *onebit) Algo() string             { return "onebit" }
func (c *onebit) Params() map[string]any   { return map[string]any{} }
func (c *onebit) Size(shape []int64) int64 { d, _ := numel(shape); return packedLen(d) + 8 }
func (c *onebit) Encode(in Input) (*wire.Compressed, error) {
	if err := checkShape(in); err != nil {
		return nil, err
	}
	x := in.Data
	b, ok, sum, sumAbs := signBlocks(x, c.workers)
	if !ok {
		return nil, CheckFinite(in.Name, x)
	}
	// The bits are 1 − signbit; onebit sends signbit: invert, keep the
	// padding zero, and count the negatives (−0 among them).
	n := len(b)
	np := 0
	j := 0
	for ; j+8 <= n; j += 8 {
		w := binary.LittleEndian.Uint64(b[j:])
		np += bits.OnesCount64(w)
		binary.LittleEndian.PutUint64(b[j:], ^w)
	}
	for ; j < n; j++ {
		np += bits.OnesCount8(b[j])
		b[j] = ^b[j]
	}
	if r := len(x) % 8; r != 0 {
		b[n-1] &= byte(0xff << (8 - r))
	}
	nn := len(x) - np
	// Σneg = (Σx − Σ|x|)/2 and Σpos = (Σx + Σ|x|)/2.
	sn, sp := (sum-sumAbs)/2, (sum+sumAbs)/2
	var mn, mp float32
	if nn > 0 {
		mn = float32(sn / float64(nn))
	}
	if np > 0 {
		mp = float32(sp / float64(np))
	}
	means := make([]byte, 8)
	binary.LittleEndian.PutUint32(means, math.Float32bits(mn))
	binary.LittleEndian.PutUint32(means[4:], math.Float32bits(mp))
	return frame(c, in, part("bits", wire.U8, b, int64(len(b))), part("means", wire.F32, means, 2)), nil
}
func (c *onebit) check(f *wire.Compressed) error {
	return checkBits(f, "bits", 1, partSpec{"means", wire.F32, 2})
}
func (c *onebit) decode(f *wire.Compressed, dst []float32) error {
	unpackParallel(dst, f.Parts[0].Data, f32at(f.Parts[1].Data, 0), f32at(f.Parts[1].Data, 1))
	return nil
}

// ---- terngrad ----

// terngrad (Wen'17): s = max |x|; element i becomes sign(x_i)·s with
// probability |x_i|/s (u_i < |x_i|/s, u_i the 24-bit uniform of draw i of
// the stream (seed, name, step)), else 0. Part "bits" holds two planes of
// ceil(d/8) bytes, plane 1 = (t > 0), plane 2 = (t < 0); part "scale" s.
//
// With clip c > 0 (param "clip", absent when off), s = min(max|x|,
// float32(c·σ)) where σ is the population standard deviation of x (two
// passes in float64 over fixed blocks: mean, then Σ(x−mean)²); elements
// beyond s are sent as ±s with probability 1, so the result is an
// unbiased estimate of the clipped tensor (TernGrad's §3.3 with c = 2.5).
type terngrad struct {
	seed    uint64
	clip    float64
	workers int
}

func (c *terngrad) Algo() string { return "terngrad" }
func (c *terngrad) Params() map[string]any {
	m := map[string]any{"seed": seedParam(c.seed)}
	if c.clip > 0 {
		m["clip"] = c.clip
	}
	return m
}
func (c *terngrad) Size(shape []int64) int64 { d, _ := numel(shape); return 2*packedLen(d) + 4 }
func (c *terngrad) Encode(in Input) (*wire.Compressed, error) {
	if err := checkShape(in); err != nil {
		return nil, err
	}
	x := in.Data
	n := len(x)
	nb := int(packedLen(int64(n)))
	// One pass for the scale and the NaN/Inf check: a NaN's or Inf's key
	// is at least +Inf's.
	m := maxMag(x, c.workers)
	if m >= 0x7f800000 {
		return nil, CheckFinite(in.Name, x)
	}
	s := math.Float32frombits(m)
	if c.clip > 0 && n > 0 {
		s = min(s, float32(c.clip*stdDev(x, c.workers)))
	}
	b := allocBytes(2 * nb)
	key := rng.Key(c.seed, in.Step, in.Name, rng.PurposeRound)
	if s > 0 {
		inv := 1 / float64(s)
		cs := chunks(n, workers(c.workers, n), 16)
		parallel(cs, func(_ int, lo, hi int) {
			ternBits(b, nb, x, lo, hi, inv, key)
		})
	}
	return frame(c, in, part("bits", wire.U8, b, int64(len(b))), part("scale", wire.F32, f32le(s), 1)), nil
}
func (c *terngrad) check(f *wire.Compressed) error {
	if err := checkBits(f, "bits", 2, partSpec{"scale", wire.F32, 1}); err != nil {
		return err
	}
	b := f.Parts[0].Data
	nb := len(b) / 2
	// Eight bytes of each plane at a time; the byte only for the message.
	j := 0
	for ; j+8 <= nb; j += 8 {
		if binary.LittleEndian.Uint64(b[j:])&binary.LittleEndian.Uint64(b[nb+j:]) != 0 {
			break
		}
	}
	for ; j < nb; j++ {
		if b[j]&b[nb+j] != 0 {
			return fmt.Errorf("part \"bits\": an element is both +1 and -1 at byte %d", j)
		}
	}
	return nil
}
func (c *terngrad) decode(f *wire.Compressed, dst []float32) error {
	s := f32at(f.Parts[1].Data, 0)
	b := f.Parts[0].Data
	nb := len(b) / 2
	cs := chunks(len(dst), workers(0, len(dst)), 16)
	parallel(cs, func(_ int, lo, hi int) {
		ternDecode(dst[lo:hi], b, nb, lo, s)
	})
	return nil
}

// stdDev is the population standard deviation of x: the mean from block
// sums, then Σ(x − mean)² from block sums, both added in block order.
func stdDev(x []float32, nworkers int) float64 {
	n := float64(len(x))
	mean := sumInOrder(blockReduce(x, nworkers, func(b []float32) float64 {
		var s float64
		for _, v := range b {
			s += float64(v)
		}
		return s
	})) / n
	ss := sumInOrder(blockReduce(x, nworkers, func(b []float32) float64 {
		var s float64
		for _, v := range b {
			d := float64(v) - mean
			s += d * d
		}
		return s
	}))
	return math.Sqrt(ss / n)
}

// ---- qsgd ----

// qsgd (Alistarh'17) with s levels (1..127): norm = ‖x‖₂ (f32), and
// element i becomes sign(x_i)·(l + [u_i < q − l]) with q = s·|x_i|/norm
// in 8.24 fixed point, l = floor(q), u_i a 24-bit uniform (qsgdBlock);
// parts "norm" f32[1], "codes" i8[d]. Decodes to norm/s·code.
type qsgd struct {
	levels  int64
	seed    uint64
	workers int
}

func (c *qsgd) Algo() string { return "qsgd" }
func (c *qsgd) Params() map[string]any {
	return map[string]any{"levels": c.levels, "seed": seedParam(c.seed)}
}
func (c *qsgd) Size(shape []int64) int64 { d, _ := numel(shape); return c.width()*d + 4 }

// width is the bytes of a code: 1 up to 127 levels, 2 above (int16).
func (c *qsgd) width() int64 {
	if c.levels > 127 {
		return 2
	}
	return 1
}
func (c *qsgd) Encode(in Input) (*wire.Compressed, error) {
	if err := checkShape(in); err != nil {
		return nil, err
	}
	x := in.Data
	n := len(x)
	// A large output buffer is allocated (and zeroed, by the runtime) while
	// the norm pass reads x: the two share the memory bus better than
	// they run one after the other. Not with one worker: --workers bounds
	// the goroutines.
	var codesCh chan []byte
	if n >= streamMin && c.levels <= 127 && workersFor(c.workers) > 1 {
		codesCh = make(chan []byte, 1)
		go func() { codesCh <- allocBytes(n) }()
	}
	ss := sumInOrder(sumSquaresBlocks(x, c.workers))
	if math.IsNaN(ss) || math.IsInf(ss, 0) {
		// Squares of finite float32s cannot overflow a float64.
		return nil, CheckFinite(in.Name, x)
	}
	norm := float32(math.Sqrt(ss))
	key := rng.Key(c.seed, in.Step, in.Name, rng.PurposeRound)
	if c.levels > 127 {
		return c.encodeWide(in, x, norm, key), nil
	}
	var codes []byte
	if codesCh != nil {
		codes = <-codesCh
	} else {
		codes = allocBytes(n)
	}
	if norm > 0 {
		sc24 := float32(float64(c.levels) / float64(norm) * (1 << 24))
		maxT := uint32(c.levels) << 24
		nb := (n + blockLen - 1) / blockLen
		parallelUnits(nb, workersFor(c.workers), func(k int) {
			e := min((k+1)*blockLen, n)
			qsgdBlock(codes[k*blockLen:e], x[k*blockLen:e], sc24, maxT, rng.Draw(key, uint64(k)), n >= streamMin)
		})
	}
	return frame(c, in, part("norm", wire.F32, f32le(norm), 1), part("codes", wire.I8, codes, int64(n))), nil
}

// encodeWide is qsgd above 127 levels: the same rounding in 40.24 fixed
// point, T = min(uint64(float64(|x|)·sc), s·2^24) with sc =
// float64(s)/float64(norm)·2^24 (float64 throughout), the level T>>24
// rounded up when the 24-bit uniform u < T & 0xffffff, the uniforms from
// qsgdBlock's per-block wyrand; codes are int16, little endian.
func (c *qsgd) encodeWide(in Input, x []float32, norm float32, key uint64) *wire.Compressed {
	n := len(x)
	codes := allocBytes(2 * n)
	if norm > 0 {
		sc := float64(c.levels) / float64(norm) * (1 << 24)
		maxT := uint64(c.levels) << 24
		nb := (n + blockLen - 1) / blockLen
		bcs := chunks(nb, max(1, min(workersFor(c.workers), nb)), 1)
		parallel(bcs, func(_ int, lo, hi int) {
			for k := lo; k < hi; k++ {
				g := wyrand(rng.Draw(key, uint64(k)))
				var r uint64
				for i := k * blockLen; i < min((k+1)*blockLen, n); i++ {
					var u uint64
					if (i-k*blockLen)%2 == 0 {
						r = g.next()
						u = r >> 40
					} else {
						u = (r >> 16) & 0xffffff
					}
					v := x[i]
					t := min(uint64(math.Abs(float64(v))*sc), maxT)
					l := int16(t>>24) + int16((u-(t&0xffffff))>>63)
					if math.Signbit(float64(v)) {
						l = -l
					}
					binary.LittleEndian.PutUint16(codes[2*i:], uint16(l))
				}
			}
		})
	}
	return frame(c, in, part("norm", wire.F32, f32le(norm), 1), part("codes", wire.I16, codes, int64(n)))
}

func (c *qsgd) check(f *wire.Compressed) error {
	d, _ := numel(f.Shape)
	if c.levels > 127 {
		if err := checkParts(f, partSpec{"norm", wire.F32, 1}, partSpec{"codes", wire.I16, d}); err != nil {
			return err
		}
		b := f.Parts[1].Data
		for j := 0; j+1 < len(b); j += 2 {
			if q := int64(int16(binary.LittleEndian.Uint16(b[j:]))); q > c.levels || q < -c.levels {
				return fmt.Errorf("part \"codes\": code %d at %d is beyond ±%d levels", q, j/2, c.levels)
			}
		}
		return nil
	}
	if err := checkParts(f, partSpec{"norm", wire.F32, 1}, partSpec{"codes", wire.I8, d}); err != nil {
		return err
	}
	if int64(maxAbsI8(f.Parts[1].Data)) <= c.levels {
		return nil
	}
	for j, b := range f.Parts[1].Data {
		if q := int64(int8(b)); q > c.levels || q < -c.levels {
			return fmt.Errorf("part \"codes\": code %d at %d is beyond ±%d levels", q, j, c.levels)
		}
	}
	return nil
}
func (c *qsgd) decode(f *wire.Compressed, dst []float32) error {
	u := f32at(f.Parts[0].Data, 0) / float32(c.levels)
	if c.levels > 127 {
		b := f.Parts[1].Data
		for i := range dst {
			dst[i] = u * float32(int16(binary.LittleEndian.Uint16(b[2*i:])))
		}
		return nil
	}
	b := f.Parts[1].Data
	cs := chunks(len(dst), workers(0, len(dst)), 64)
	parallel(cs, func(_ int, lo, hi int) {
		qsgdDecode(dst[lo:hi], b[lo:hi], u)
	})
	return nil
}

// ---- fp16, bf16 ----

type half struct {
	algo    string
	dt      wire.DType
	to      func(float32) uint16
	from    func(uint16) float32
	workers int
}

func (c *half) Algo() string             { return c.algo }
func (c *half) Params() map[string]any   { return map[string]any{} }
func (c *half) Size(shape []int64) int64 { d, _ := numel(shape); return 2 * d }
func (c *half) Encode(in Input) (*wire.Compressed, error) {
	if err := checkShape(in); err != nil {
		return nil, err
	}
	x := in.Data
	b := allocBytes(2 * len(x))
	cs := chunks(len(x), workers(c.workers, len(x)), 64)
	kern := f16Into
	if len(x) >= streamMin {
		kern = f16IntoStream
	}
	if c.dt == wire.BF16 {
		kern = bf16Into
		if len(x) >= streamMin {
			kern = bf16IntoStream
		}
	}
	oks := make([]bool, len(cs))
	parallel(cs, func(ci int, lo, hi int) {
		if hi > lo {
			oks[ci] = kern(b[2*lo:2*hi], x[lo:hi])
		} else {
			oks[ci] = true
		}
	})
	for _, ok := range oks {
		if !ok {
			return nil, CheckFinite(in.Name, x)
		}
	}
	return frame(c, in, part("data", c.dt, b, int64(len(x)))), nil
}
func (c *half) check(f *wire.Compressed) error {
	d, _ := numel(f.Shape)
	return checkParts(f, partSpec{"data", c.dt, d})
}
func (c *half) decode(f *wire.Compressed, dst []float32) error {
	b := f.Parts[0].Data
	cs := chunks(len(dst), workers(0, len(dst)), 64)
	dec := f16Decode
	if c.dt == wire.BF16 {
		dec = bf16Decode
	}
	parallel(cs, func(_ int, lo, hi int) {
		dec(dst[lo:hi], b[2*lo:2*hi])
	})
	return nil
}

// ---- natural ----

// natural (Horváth et al.'19, GRACE "natural"): each element is rounded
// stochastically to a signed power of two, unbiasedly: for 2^e ≤ |x| <
// 2^(e+1), up to 2^(e+1) with probability |x|/2^e − 1. One byte per
// element: 0 is zero; otherwise bit 7 is the sign and c = bits 0–6
// (1…127) stands for 2^(c−100), i.e. 2^−99 … 2^27. Magnitudes below 2^−99
// round to 0 or 2^−99 (unbiasedly); at or above 2^27 they saturate to 2^27.
type natural struct {
	seed    uint64
	workers int
}

func (c *natural) Algo() string             { return "natural" }
func (c *natural) Params() map[string]any   { return map[string]any{"seed": seedParam(c.seed)} }
func (c *natural) Size(shape []int64) int64 { d, _ := numel(shape); return d }
func (c *natural) Encode(in Input) (*wire.Compressed, error) {
	if err := checkShape(in); err != nil {
		return nil, err
	}
	x := in.Data
	codes := allocBytes(len(x))
	key := rng.Key(c.seed, in.Step, in.Name, rng.PurposeRound)
	cs := chunks(len(x), workers(c.workers, len(x)), 64)
	oks := make([]bool, len(cs))
	parallel(cs, func(ci int, lo, hi int) {
		oks[ci] = naturalCodes(codes[lo:hi], x[lo:hi], lo, key)
	})
	for _, ok := range oks {
		if !ok {
			return nil, CheckFinite(in.Name, x)
		}
	}
	return frame(c, in, part("codes", wire.U8, codes, int64(len(x)))), nil
}

func naturalCode(v float32, r uint64) byte {
	b := math.Float32bits(v)
	sign := byte(b>>31) << 7
	mag := b & 0x7fffffff
	if mag == 0 {
		return 0
	}
	exp := int(mag>>23) - 127 // unbiased exponent for normals
	if mag>>23 == 0 || exp < -99 {
		// Below 2^-99: 2^-99 with probability |x|/2^-99, else 0.
		p := float64(math.Float32frombits(mag)) * math.Ldexp(1, 99)
		if float64(rng.Unit24(r)) < p {
			return sign | 1
		}
		return 0
	}
	if exp >= 27 {
		return sign | 127
	}
	man := mag & 0x7fffff
	if uint32(r>>41) < man { // 23-bit uniform < mantissa: P = man/2^23
		exp++
	}
	if exp >= 27 {
		exp = 27
	}
	return sign | byte(exp+100)
}

func naturalValue(code byte) float32 {
	c := code & 0x7f
	if c == 0 {
		return 0
	}
	v := float32(math.Ldexp(1, int(c)-100))
	if code&0x80 != 0 {
		return -v
	}
	return v
}

func (c *natural) check(f *wire.Compressed) error {
	d, _ := numel(f.Shape)
	if err := checkParts(f, partSpec{"codes", wire.U8, d}); err != nil {
		return err
	}
	if j := bytes.IndexByte(f.Parts[0].Data, 0x80); j >= 0 {
		return fmt.Errorf("part \"codes\": code 0x80 (negative zero) at %d is not canonical", j)
	}
	return nil
}
func (c *natural) decode(f *wire.Compressed, dst []float32) error {
	b := f.Parts[0].Data
	parallel(chunks(len(dst), workers(0, len(dst)), 64), func(_ int, lo, hi int) {
		naturalDecode(dst[lo:hi], b[lo:hi])
	})
	return nil
}

func f32le(v float32) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint32(b, math.Float32bits(v))
	return b
}

func f32at(b []byte, i int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
}

func init() {
	none := map[string]string{}
	seed := map[string]string{"seed": "0"}
	reg := func(info Info, fo func(o Options) (Codec, error), fp func(m map[string]any) (Codec, error)) {
		register(factory{info: info, fromOptions: fo, fromParams: fp})
	}
	reg(Info{Algo: "signsgd", Kind: "quantization", Params: none, SizeFormula: "ceil(d/8)",
		Summable: "majority vote: sum gives sign(Σ ±1) as a signsgd frame (ties to +1)",
		Doc:      "sign bits (x ≥ 0 → 1), MSB first; decodes to ±1"},
		func(o Options) (Codec, error) { return &signsgd{o.Workers}, nil },
		func(map[string]any) (Codec, error) { return &signsgd{}, nil })
	reg(Info{Algo: "signum", Kind: "quantization", Params: map[string]string{"momentum": "0.9"}, SizeFormula: "ceil(d/8)",
		Summable: "majority vote (as signsgd)",
		Doc:      "sign of the momentum m = β·m + (1−β)·x (state slot m); decodes to ±1"},
		func(o Options) (Codec, error) {
			b := o.Momentum
			if b == 0 {
				b = 0.9
			}
			if !(b >= 0 && b < 1) {
				return nil, fmt.Errorf("codec: signum: momentum %v not in [0, 1)", b)
			}
			return &signum{b, o.Workers}, nil
		},
		func(m map[string]any) (Codec, error) {
			b, err := pFloat(m, "momentum")
			return &signum{beta: b}, err
		})
	reg(Info{Algo: "efsignsgd", Kind: "quantization", Params: none, SizeFormula: "ceil(d/8) + 4",
		Summable: "no (scales differ per worker)",
		Doc:      "sign bits (x ≥ 0 → 1) and scale mean|x|; decodes to ±scale; pair with --memory efsignsgd"},
		func(o Options) (Codec, error) { return &efsignsgd{o.Workers}, nil },
		func(map[string]any) (Codec, error) { return &efsignsgd{}, nil })
	reg(Info{Algo: "onebit", Kind: "quantization", Params: none, SizeFormula: "ceil(d/8) + 8",
		Summable: "no",
		Doc:      "1-bit SGD: bit (x < 0 → 1), means of negatives and non-negatives; preserves Σx"},
		func(o Options) (Codec, error) { return &onebit{o.Workers}, nil },
		func(map[string]any) (Codec, error) { return &onebit{}, nil })
	reg(Info{Algo: "terngrad", Kind: "quantization", Params: map[string]string{"seed": "0", "clip": "0 (off; TernGrad: 2.5)"},
		SizeFormula: "2·ceil(d/8) + 4",
		Summable:    "no (scales differ per worker)",
		Doc:         "stochastic ternary {−s, 0, s}, s = max|x| (or min(max|x|, clip·σ)), unbiased"},
		func(o Options) (Codec, error) {
			if !(o.Clip >= 0) || math.IsInf(o.Clip, 0) {
				return nil, fmt.Errorf("codec: terngrad: clip %v is not a finite number ≥ 0", o.Clip)
			}
			return &terngrad{o.Seed, o.Clip, o.Workers}, nil
		},
		func(m map[string]any) (Codec, error) {
			s, err := pUint(m, "seed")
			if err != nil {
				return nil, err
			}
			c := &terngrad{seed: s}
			if _, ok := m["clip"]; ok {
				if c.clip, err = pFloat(m, "clip"); err != nil {
					return nil, err
				}
				if !(c.clip > 0) {
					return nil, fmt.Errorf("params: \"clip\" = %v, want > 0 (absent when off)", c.clip)
				}
			}
			return c, nil
		})
	reg(Info{Algo: "qsgd", Kind: "quantization", Params: map[string]string{"levels": "64 (1..32767)", "seed": "0"},
		SizeFormula: "d + 4 (levels ≤ 127), 2d + 4 (int16 codes above)",
		Summable:    "no (norms differ per worker)",
		Doc:         "QSGD: stochastic rounding of s·|x|/‖x‖₂ to int8 levels (int16 above 127), unbiased"},
		func(o Options) (Codec, error) {
			l := o.Levels
			if l == 0 {
				l = 64
			}
			if l < 1 || l > 32767 {
				return nil, fmt.Errorf("codec: qsgd: levels %d not in [1, 32767]", l)
			}
			return &qsgd{l, o.Seed, o.Workers}, nil
		},
		func(m map[string]any) (Codec, error) {
			l, err := pInt(m, "levels", 1, 32767)
			if err != nil {
				return nil, err
			}
			s, err := pUint(m, "seed")
			return &qsgd{levels: l, seed: s}, err
		})
	reg(Info{Algo: "fp16", Kind: "quantization", Params: none, SizeFormula: "2d",
		Summable: "yes: element-wise sum in f32, rounded to f16 (allreduce)",
		Doc:      "IEEE half, round to nearest even; beyond ±65504 becomes ±Inf"},
		func(o Options) (Codec, error) { return &half{"fp16", wire.F16, F32ToF16, F16ToF32, o.Workers}, nil },
		func(map[string]any) (Codec, error) { return &half{"fp16", wire.F16, F32ToF16, F16ToF32, 0}, nil })
	reg(Info{Algo: "bf16", Kind: "quantization", Params: none, SizeFormula: "2d",
		Summable: "yes: element-wise sum in f32, rounded to bf16 (allreduce)",
		Doc:      "bfloat16, round to nearest even"},
		func(o Options) (Codec, error) { return &half{"bf16", wire.BF16, F32ToBF16, BF16ToF32, o.Workers}, nil },
		func(map[string]any) (Codec, error) { return &half{"bf16", wire.BF16, F32ToBF16, BF16ToF32, 0}, nil })
	reg(Info{Algo: "natural", Kind: "quantization", Params: seed, SizeFormula: "d",
		Summable: "no",
		Doc:      "natural compression: unbiased stochastic rounding to signed powers of two, one byte each"},
		func(o Options) (Codec, error) { return &natural{o.Seed, o.Workers}, nil },
		func(m map[string]any) (Codec, error) {
			s, err := pUint(m, "seed")
			return &natural{seed: s}, err
		})
}
