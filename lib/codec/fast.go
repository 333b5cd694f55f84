package codec

import (
	"math"
	"math/bits"
	"unsafe"

	"trainwire.dev/lib/rng"
	"trainwire.dev/lib/tensor"
)

// Word-at-a-time kernels: on little-endian hosts (tensor.ZeroCopy) an
// 8-byte-aligned []float32 is read as uint64 words, two elements per
// load, and the sign, exponent and rounding work is done on both halves
// at once. Each falls back to its scalar form otherwise; the tests compare
// both with the plain twins.

const (
	expMask2  = 0x7f8000007f800000
	expCarry2 = 0x0080000000800000
	signs2    = 0x8000000080000000
)

// words views x as uint64 pairs when that is possible.
func words(x []float32) ([]uint64, bool) {
	if !tensor.ZeroCopy || len(x) < 2 || uintptr(unsafe.Pointer(&x[0]))%8 != 0 {
		return nil, false
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&x[0])), len(x)/2), true
}

// packSignBitsW is packSignBits on words; x must be a whole number of
// 8-element groups and 8-byte aligned.
func packSignBitsW(dst []byte, w []uint64) bool {
	var bad uint64
	n := len(w) / 4
	_ = dst[n-1]
	for j := 0; j < n; j++ {
		q := (*[4]uint64)(w[4*j:])
		w0, w1, w2, w3 := q[0], q[1], q[2], q[3]
		bad |= (w0&expMask2 + expCarry2) | (w1&expMask2 + expCarry2) | (w2&expMask2 + expCarry2) | (w3&expMask2 + expCarry2)
		m := (w0&signs2)>>31 | (w1&signs2)>>29 | (w2&signs2)>>27 | (w3&signs2)>>25
		m |= m >> 31
		dst[j] = ^bits.Reverse8(byte(m))
	}
	return bad&signs2 == 0
}

// signBitsInto packs x into dst with the fastest kernel that applies:
// signBitsAVX2 for the leading multiple of 32 elements where the CPU has
// AVX2, signBitsGo for the rest (and everything elsewhere).
func signBitsInto(dst []byte, x []float32) bool {
	if haveAVX2 && len(x) >= 32 {
		k := len(x) / 32 * 32
		bad := signBitsAVX2(&dst[0], &x[0], k)
		return signBitsGo(dst[k/8:], x[k:]) && !bad
	}
	return signBitsGo(dst, x)
}

// signBitsGo is signBitsInto in pure Go (packSignBitsW on aligned words).
func signBitsGo(dst []byte, x []float32) bool {
	n8 := len(x) / 8 * 8
	if w, ok := words(x[:n8]); ok && n8 > 0 {
		ok1 := packSignBitsW(dst, w)
		ok2 := packSignBits(dst[n8/8:], x[n8:])
		return ok1 && ok2
	}
	return packSignBits(dst, x)
}

// f16Words converts pairs of floats to pairs of halves; pairs outside the
// normal half range take the scalar path. It returns false on NaN/Inf.
func f16Words(dst []uint32, w []uint64) bool {
	var bad uint64
	slow := 0
	_ = dst[len(w)-1]
	for i, v := range w {
		bad |= v&expMask2 + expCarry2
		mag := v &^ signs2
		a, b := uint32(mag), uint32(mag>>32)
		if a-0x38800000 < 0x477fe000-0x38800000 && b-0x38800000 < 0x477fe000-0x38800000 {
			// Round to nearest even on both halves at once: the carries
			// stay inside each half.
			r := mag + 0x00000fff00000fff + (mag>>13)&0x0000000100000001
			r = (r >> 13) & 0x0007ffff0007ffff
			r -= 0x0001c0000001c000
			r |= (v >> 16) & 0x0000800000008000
			dst[i] = uint32(r) | uint32(r>>32)<<16
		} else {
			slow++ // no call in this loop: it would spill the loop's registers
		}
	}
	if slow > 0 {
		f16Slow(dst, w)
	}
	return bad&signs2 == 0
}

// f16Slow converts the pairs f16Words left out (a half outside the normal
// half range: zeros, subnormals, overflow).
func f16Slow(dst []uint32, w []uint64) {
	for i, v := range w {
		mag := v &^ signs2
		a, b := uint32(mag), uint32(mag>>32)
		if a-0x38800000 < 0x477fe000-0x38800000 && b-0x38800000 < 0x477fe000-0x38800000 {
			continue
		}
		lo := F32ToF16(math.Float32frombits(uint32(v)))
		hi := F32ToF16(math.Float32frombits(uint32(v >> 32)))
		dst[i] = uint32(lo) | uint32(hi)<<16
	}
}

// f16Into converts x to halves in dst (2 bytes each): f16AVX for the
// leading multiple of 8 elements where the CPU has F16C, f16Go for the
// rest (and everything elsewhere).
func f16Into(dst []byte, x []float32) bool {
	if haveF16C && len(x) >= 8 {
		k := len(x) / 8 * 8
		bad := f16AVX(&dst[0], &x[0], k)
		ok := true
		if k < len(x) {
			ok = f16Go(dst[2*k:], x[k:])
		}
		return ok && !bad
	}
	return f16Go(dst, x)
}

// f16IntoStream is f16Into for a chunk of a tensor too large for the
// caches: where dst is 32-byte aligned, f16AVXNT writes the leading
// multiple of 32 halves with non-temporal stores, which saves reading
// the fresh output buffer into the cache first. The bytes are f16Into's.
func f16IntoStream(dst []byte, x []float32) bool {
	if !haveF16C || len(x) < 32 || uintptr(unsafe.Pointer(&dst[0]))%32 != 0 {
		return f16Into(dst, x)
	}
	k := len(x) / 32 * 32
	bad := f16AVXNT(&dst[0], &x[0], k)
	ok := true
	if k < len(x) {
		ok = f16Into(dst[2*k:], x[k:])
	}
	return ok && !bad
}

// f16Go is f16Into in pure Go (f16Words on aligned pairs).
func f16Go(dst []byte, x []float32) bool {
	if len(x) == 0 {
		return true
	}
	n2 := len(x) / 2 * 2
	if w, ok := words(x[:n2]); ok && uintptr(unsafe.Pointer(&dst[0]))%4 == 0 {
		d := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), n2/2)
		ok1 := f16Words(d, w)
		ok2 := true
		if n2 < len(x) {
			ok2 = f16Fast(dst[2*n2:], x[n2:])
		}
		return ok1 && ok2
	}
	return f16Fast(dst, x)
}

// wyrand is a small sequential generator (Wang Yi's wyrand): one 128-bit
// multiply per 64 bits.
type wyrand uint64

func (s *wyrand) next() uint64 {
	*s += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(uint64(*s), uint64(*s)^0xe7037ed1a0b428db)
	return hi ^ lo
}

// streamMin is the tensor size (elements) from which the qsgd kernels
// write their codes with non-temporal stores: beyond the caches, the
// codes would only evict the input.
const streamMin = 1 << 23

// qsgdBlock quantises one block of x (≤ blockLen elements, starting at a
// multiple of blockLen) into codes: t = uint32(|x|·sc24) is the level in
// 8.24 fixed point (sc24 = s/‖x‖·2^24, clamped to s·2^24); the level is
// t>>24, rounded up when the 24-bit uniform u < t & 0xffffff. The uniforms
// come two per 64-bit output of a wyrand seeded with rng.Draw(key, block).
//
// With AVX2 and a finite sc24 (so that every |x|·sc24 ≤ s·2^24·(1+2^-23)
// converts the same way in both), qsgdAVX2 takes the leading multiple of
// 16 elements and qsgdBlockGo the rest, from the generator state it left.
//
// With AVX-512, qsgdAVX512 takes the leading multiple of 32 elements;
// with stream set (a tensor too large for the caches) and codes 64-byte
// aligned, it writes them with non-temporal stores.
func qsgdBlock(codes []byte, x []float32, sc24 float32, maxT uint32, seed uint64, stream bool) {
	k := 0
	if haveAVX2 && len(x) >= 16 && !math.IsInf(float64(sc24), 0) && maxT <= 127<<24 {
		if haveAVX512 && len(x) >= 32 {
			k = len(x) / 32 * 32
			stream = stream && uintptr(unsafe.Pointer(&codes[0]))%64 == 0
			seed = qsgdAVX512(&codes[0], &x[0], k, sc24, maxT, seed, stream)
		} else {
			k = len(x) / 16 * 16
			seed = qsgdAVX2(&codes[0], &x[0], k, sc24, maxT, seed)
		}
	}
	if k < len(x) {
		qsgdBlockGo(codes[k:], x[k:], sc24, maxT, seed)
	}
}

// qsgdBlockGo is qsgdBlock in pure Go.
func qsgdBlockGo(codes []byte, x []float32, sc24 float32, maxT uint32, seed uint64) {
	g := wyrand(seed)
	n := len(x)
	_ = codes[n-1]
	i := 0
	for ; i+2 <= n; i += 2 {
		r := g.next()
		codes[i] = qsgdOne(x[i], sc24, maxT, uint32(r>>40))
		codes[i+1] = qsgdOne(x[i+1], sc24, maxT, uint32(r>>16)&0xffffff)
	}
	if i < n {
		codes[i] = qsgdOne(x[i], sc24, maxT, uint32(g.next()>>40))
	}
}

func qsgdOne(v float32, sc24 float32, maxT uint32, u uint32) byte {
	b := math.Float32bits(v)
	t := min(uint32(math.Float32frombits(b&0x7fffffff)*sc24), maxT)
	l := int32(t>>24) + int32((u-(t&0xffffff))>>31)
	s := int32(b) >> 31
	return byte((l ^ s) - s)
}

// sumSquaresBlocks is blockReduce(x, nworkers, sumSquaresGo): Σx² per
// fixed block, each in sumSquaresGo's order; with AVX2 eight whole blocks
// at a time go through sumSquares8AVX2. The workers take units of eight
// blocks from a shared counter (parallelUnits).
func sumSquaresBlocks(x []float32, nworkers int) []float64 {
	nb := (len(x) + blockLen - 1) / blockLen
	out := make([]float64, nb)
	full := len(x) / blockLen // blocks of exactly blockLen
	parallelUnits((nb+7)/8, workersFor(nworkers), func(u int) {
		b, hi := 8*u, min(8*u+8, nb)
		if haveAVX2 && hi <= full && hi-b == 8 {
			sumSquares8AVX2(&x[b*blockLen], blockLen, (*[8]float64)(out[b:]))
			return
		}
		for ; b < hi; b++ {
			out[b] = sumSquaresGo(x[b*blockLen : min((b+1)*blockLen, len(x))])
		}
	})
	return out
}

// signSums packs 1 − signbit(x) into dst (as packSignBits) and returns Σx
// and Σ|x|, from float32 partial sums of 8 added to float64 in order;
// false if x holds a non-finite value. It takes signSumsAVX2 for the
// leading multiple of 32 elements where the CPU has it, signSumsGo for
// the rest (and everything elsewhere): the results are the same bits.
func signSums(dst []byte, x []float32) (ok bool, sum, sumAbs float64) {
	k := 0
	bad := false
	if haveAVX2 && len(x) >= 32 {
		k = len(x) / 32 * 32
		bad, sum, sumAbs = signSumsAVX2(&dst[0], &x[0], k)
	}
	ok, sum, sumAbs = signSumsGo(dst[k/8:], x[k:], sum, sumAbs)
	return ok && !bad, sum, sumAbs
}

// signSumsGo is signSums in pure Go, continuing the sums sum0, sumAbs0.
func signSumsGo(dst []byte, x []float32, sum0, sumAbs0 float64) (ok bool, sum, sumAbs float64) {
	sum, sumAbs = sum0, sumAbs0
	n8 := len(x) / 8
	if n8 > 0 {
		if w, aligned := words(x[:8*n8]); aligned {
			ok = packSignBitsW(dst, w)
		} else {
			ok = packSignBits(dst, x[:8*n8])
		}
	} else {
		ok = true
	}
	for j := 0; j < n8; j++ {
		v := (*[8]float32)(x[8*j:])
		s := ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))
		a0 := math.Float32frombits(math.Float32bits(v[0]) & 0x7fffffff)
		a1 := math.Float32frombits(math.Float32bits(v[1]) & 0x7fffffff)
		a2 := math.Float32frombits(math.Float32bits(v[2]) & 0x7fffffff)
		a3 := math.Float32frombits(math.Float32bits(v[3]) & 0x7fffffff)
		a4 := math.Float32frombits(math.Float32bits(v[4]) & 0x7fffffff)
		a5 := math.Float32frombits(math.Float32bits(v[5]) & 0x7fffffff)
		a6 := math.Float32frombits(math.Float32bits(v[6]) & 0x7fffffff)
		a7 := math.Float32frombits(math.Float32bits(v[7]) & 0x7fffffff)
		sum += float64(s)
		sumAbs += float64(((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7)))
	}
	if r := x[8*n8:]; len(r) > 0 {
		ok = packSignBits(dst[n8:], r) && ok
		for _, v := range r {
			sum += float64(v)
			sumAbs += math.Abs(float64(v))
		}
	}
	return ok, sum, sumAbs
}

// signBlocks runs signSums over fixed blocks in parallel and returns the
// packed bits and the sums (in block order).
func signBlocks(x []float32, nworkers int) (b []byte, ok bool, sum, sumAbs float64) {
	b = allocBytes(int(packedLen(int64(len(x)))))
	nb := (len(x) + blockLen - 1) / blockLen
	s, a := make([]float64, nb), make([]float64, nb)
	oks := make([]bool, nb)
	cs := chunks(nb, max(1, min(workersFor(nworkers), nb)), 1)
	parallel(cs, func(_ int, lo, hi int) {
		for k := lo; k < hi; k++ {
			oks[k], s[k], a[k] = signSums(b[k*blockLen/8:], x[k*blockLen:min((k+1)*blockLen, len(x))])
		}
	})
	ok = true
	for k := range s {
		sum += s[k]
		sumAbs += a[k]
		ok = ok && oks[k]
	}
	return b, ok, sum, sumAbs
}

// bf16Into converts x to bfloat16 in dst (2 bytes each) and reports
// whether x is finite: bf16AVX2 for the leading multiple of 16 elements
// where the CPU has AVX2, bf16Fast for the rest (and everything
// elsewhere). With a NaN or ±Inf in x it redoes x with bf16Fast, so the
// bytes are bf16Fast's in every case.
func bf16Into(dst []byte, x []float32) bool {
	if len(x) == 0 {
		return true
	}
	if !haveAVX2 || len(x) < 16 {
		return bf16Fast(dst, x)
	}
	k := len(x) / 16 * 16
	bad := bf16AVX2(&dst[0], &x[0], k)
	ok := true
	if k < len(x) {
		ok = bf16Fast(dst[2*k:], x[k:])
	}
	if bad {
		return bf16Fast(dst, x)
	}
	return ok
}

// bf16IntoStream is bf16Into for a chunk of a tensor too large for the
// caches: where dst is 32-byte aligned, bf16AVX2NT writes the leading
// multiple of 16 with non-temporal stores. The bytes are bf16Into's.
func bf16IntoStream(dst []byte, x []float32) bool {
	if !haveAVX2 || len(x) < 16 || uintptr(unsafe.Pointer(&dst[0]))%32 != 0 {
		return bf16Into(dst, x)
	}
	k := len(x) / 16 * 16
	bad := bf16AVX2NT(&dst[0], &x[0], k)
	ok := true
	if k < len(x) {
		ok = bf16Fast(dst[2*k:], x[k:])
	}
	if bad {
		return bf16Fast(dst, x)
	}
	return ok
}

// qsgdDecode sets dst[i] = u·float32(int8(codes[i])): qsgdDecodeAVX2 for
// the leading multiple of 32 elements where the CPU has AVX2,
// qsgdDecodeGo for the rest (and everything elsewhere).
func qsgdDecode(dst []float32, codes []byte, u float32) {
	k := 0
	if haveAVX2 && len(dst) >= 32 {
		k = len(dst) / 32 * 32
		qsgdDecodeAVX2(&dst[0], &codes[0], k, u)
	}
	qsgdDecodeGo(dst[k:], codes[k:], u)
}

// qsgdDecodeGo is qsgdDecode in pure Go.
func qsgdDecodeGo(dst []float32, codes []byte, u float32) {
	codes = codes[:len(dst)]
	for i, b := range codes {
		dst[i] = u * float32(int8(b))
	}
}

// maxMag returns the largest magnitude key (float32 bits without the sign)
// of x, in parallel: ≥ 0x7f800000 when x holds a NaN or ±Inf. maxMagAVX2
// takes the leading multiple of 32 elements of each chunk where the CPU
// has AVX2, maxMagGo the rest.
func maxMag(x []float32, nworkers int) uint32 {
	return parallelMax(x, workers(nworkers, len(x)), maxMagAVX2, maxMagGo)
}

// parallelMax is the largest of the per-chunk maxima of x on w workers:
// the AVX2 kernel takes the leading multiple of 32 elements of each chunk
// where the CPU has AVX2, its Go twin the rest.
func parallelMax[T any, R uint8 | uint32](x []T, w int, avx2 func(*T, int) R, twin func([]T) R) R {
	cs := chunks(len(x), w, 32)
	ms := make([]R, len(cs))
	parallel(cs, func(c int, lo, hi int) {
		k := lo
		if haveAVX2 && hi-lo >= 32 {
			k = lo + (hi-lo)/32*32
			ms[c] = avx2(&x[lo], k-lo)
		}
		ms[c] = max(ms[c], twin(x[k:hi]))
	})
	var m R
	for _, v := range ms {
		m = max(m, v)
	}
	return m
}

// maxMagGo is maxMag's plain twin.
func maxMagGo(x []float32) uint32 {
	var m uint32
	for _, v := range x {
		m = max(m, magKey(v))
	}
	return m
}

// ternBits sets TernGrad's bits for elements [lo, hi) (lo a multiple of
// 8; the bytes of [lo, hi) belong to this call): ternAVX512 for the
// leading multiple of 16 elements where the CPU has AVX-512, else ternAVX2
// for the leading multiple of 16 where it has AVX2, ternBitsGo for the rest
// (and everything elsewhere).
func ternBits(b []byte, nb int, x []float32, lo, hi int, inv float64, key uint64) {
	i := lo
	if haveAVX512 && hi-lo >= 16 {
		k := (hi - lo) / 16 * 16
		ternAVX512(&b[lo/8], nb, &x[lo], k, inv, key+uint64(lo)*rng.Golden)
		i = lo + k
	} else if haveAVX2 && hi-lo >= 16 {
		k := (hi - lo) / 16 * 16
		ternAVX2(&b[lo/8], nb, &x[lo], k, inv, key+uint64(lo)*rng.Golden)
		i = lo + k
	}
	ternBitsGo(b, nb, x, i, hi, inv, key)
}

// ternBitsGo is ternBits in pure Go: element i is sent when
// Unit24(Draw(key, i)) < float32(|x_i|·inv), to plane 1 (x > 0) or 2.
func ternBitsGo(b []byte, nb int, x []float32, lo, hi int, inv float64, key uint64) {
	for i := lo; i < hi; i++ {
		v := x[i]
		p := float32(math.Abs(float64(v)) * inv) // ≥ 1 beyond a clip: always sent
		if rng.Unit24(rng.Draw(key, uint64(i))) < p {
			if v > 0 {
				b[i/8] |= 0x80 >> (i % 8)
			} else {
				b[nb+i/8] |= 0x80 >> (i % 8)
			}
		}
	}
}

// naturalCodes sets codes[j] = naturalCode(x[j], Draw(key, i0+j)) and
// reports whether x is finite: naturalAVX512 for the leading multiple of
// 16 elements where the CPU has AVX-512, else naturalAVX2 for the leading
// multiple of 16 where it has AVX2, naturalCodesGo for the rest (and
// everything elsewhere).
func naturalCodes(codes []byte, x []float32, i0 int, key uint64) bool {
	k := 0
	bad := false
	if haveAVX512 && len(x) >= 16 {
		k = len(x) / 16 * 16
		bad = naturalAVX512(&codes[0], &x[0], k, key+uint64(i0)*rng.Golden)
	} else if haveAVX2 && len(x) >= 16 {
		k = len(x) / 16 * 16
		bad = naturalAVX2(&codes[0], &x[0], k, key+uint64(i0)*rng.Golden)
	}
	return naturalCodesGo(codes[k:], x[k:], i0+k, key) && !bad
}

// naturalCodesGo is naturalCodes in pure Go.
func naturalCodesGo(codes []byte, x []float32, i0 int, key uint64) bool {
	var bad uint32
	for j, v := range x {
		bad |= expBad(math.Float32bits(v))
		codes[j] = naturalCode(v, rng.Draw(key, uint64(i0+j)))
	}
	return bad&0x80000000 == 0
}

// maxAbsI8 returns the largest |int8(v)| of b (−128 gives 128), in
// parallel: maxAbsI8AVX2 for the leading multiple of 32 bytes of each
// chunk where the CPU has AVX2, maxAbsI8Go for the rest.
func maxAbsI8(b []byte) uint8 {
	return parallelMax(b, workers(0, len(b)/4), maxAbsI8AVX2, maxAbsI8Go)
}

// maxAbsI8Go is maxAbsI8's plain twin.
func maxAbsI8Go(b []byte) uint8 {
	var m uint8
	for _, v := range b {
		a := int8(v)
		if a < 0 {
			m = max(m, uint8(-int16(a)))
		} else {
			m = max(m, uint8(a))
		}
	}
	return m
}

// f16Decode sets dst[i] = F16ToF32 of the little-endian half i of src:
// f16DecodeAVX for the leading multiple of 32 where the CPU has F16C,
// f16DecodeGo for the rest.
func f16Decode(dst []float32, src []byte) {
	k := 0
	if haveF16C && len(dst) >= 32 {
		k = len(dst) / 32 * 32
		f16DecodeAVX(&dst[0], &src[0], k)
	}
	f16DecodeGo(dst[k:], src[2*k:])
}

// f16DecodeGo is f16Decode in pure Go (a table of every half's value for
// long inputs).
func f16DecodeGo(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	if len(dst) < 1<<12 {
		for i := range dst {
			dst[i] = F16ToF32(uint16(src[2*i]) | uint16(src[2*i+1])<<8)
		}
		return
	}
	tab := f16Table()
	for i := range dst {
		dst[i] = tab[uint16(src[2*i])|uint16(src[2*i+1])<<8]
	}
}

// naturalDecode sets dst[i] = naturalValue(src[i]): naturalDecodeAVX2
// for the leading multiple of 16 where the CPU has AVX2,
// naturalDecodeGo for the rest.
func naturalDecode(dst []float32, src []byte) {
	k := 0
	if haveAVX2 && len(dst) >= 16 {
		k = len(dst) / 16 * 16
		naturalDecodeAVX2(&dst[0], &src[0], k)
	}
	naturalDecodeGo(dst[k:], src[k:])
}

// naturalValues holds naturalValue of every code.
var naturalValues = func() (t [256]float32) {
	for i := range t {
		t[i] = naturalValue(byte(i))
	}
	return t
}()

// naturalDecodeGo is naturalDecode in pure Go.
func naturalDecodeGo(dst []float32, src []byte) {
	src = src[:len(dst)]
	for i, b := range src {
		dst[i] = naturalValues[b]
	}
}

// bf16Decode sets dst[i] = BF16ToF32 of the little-endian half i of src:
// bf16DecodeAVX2 for the leading multiple of 16 where the CPU has AVX2,
// bf16DecodeGo for the rest.
func bf16Decode(dst []float32, src []byte) {
	k := 0
	if haveAVX2 && len(dst) >= 16 {
		k = len(dst) / 16 * 16
		bf16DecodeAVX2(&dst[0], &src[0], k)
	}
	bf16DecodeGo(dst[k:], src[2*k:])
}

// bf16DecodeGo is bf16Decode in pure Go.
func bf16DecodeGo(dst []float32, src []byte) {
	src = src[:2*len(dst)]
	for i := range dst {
		dst[i] = BF16ToF32(uint16(src[2*i]) | uint16(src[2*i+1])<<8)
	}
}

// ternDecode decodes TernGrad's elements [lo, lo+len(dst)) (lo a multiple
// of 8) from the planes b[:nb] and b[nb:]: ternDecodeAVX512 for the
// leading multiple of 16 where the CPU has AVX-512, else ternDecodeAVX2
// for the leading multiple of 8 where it has AVX2, ternDecodeGo for the
// rest (and everything elsewhere).
func ternDecode(dst []float32, b []byte, nb, lo int, s float32) {
	k := 0
	switch {
	case haveAVX512 && len(dst) >= 16:
		k = len(dst) / 16 * 16
		ternDecodeAVX512(&dst[0], &b[lo/8], nb, k, s)
	case haveAVX2 && len(dst) >= 8:
		k = len(dst) / 8 * 8
		ternDecodeAVX2(&dst[0], &b[lo/8], nb, k, s)
	}
	ternDecodeGo(dst[k:], b, nb, lo+k, s)
}

// ternDecodeGo is ternDecode in pure Go: plane 1 → s, else plane 2 → −s,
// else 0.
func ternDecodeGo(dst []float32, b []byte, nb, lo int, s float32) {
	for j := range dst {
		i := lo + j
		sh := byte(0x80) >> (i % 8)
		switch {
		case b[i/8]&sh != 0:
			dst[j] = s
		case b[nb+i/8]&sh != 0:
			dst[j] = -s
		default:
			dst[j] = 0
		}
	}
}

// countGE3 returns, for each of three thresholds tk[j] ≤ 0x7f800001
// (KeyCeil's range), how many elements of x have a magnitude key ≥ tk[j],
// in one pass: countGE3AVX2 for the leading multiple of 32 (in pieces
// below its 2^35 bound) where the CPU has AVX2, countGEGo for the rest.
func countGE3(x []float32, tk [3]uint32) [3]int {
	var n [3]int
	k := 0
	if haveAVX2 && len(x) >= 32 {
		k = len(x) / 32 * 32
		tm1 := [3]int32{int32(tk[0]) - 1, int32(tk[1]) - 1, int32(tk[2]) - 1}
		for b := 0; b < k; b += 1 << 30 {
			var out [3]int
			countGE3AVX2(&x[b], min(k-b, 1<<30), &tm1, &out)
			n[0], n[1], n[2] = n[0]+out[0], n[1]+out[1], n[2]+out[2]
		}
	}
	for j := range n {
		n[j] += countGEGo(x[k:], tk[j])
	}
	return n
}

// countGE7 is countGE3 for seven thresholds: countGE7AVX2 for the leading
// multiple of 8 (in pieces below its 2^35 bound) where the CPU has AVX2,
// countGEGo for the rest.
func countGE7(x []float32, tk [7]uint32) [7]int {
	var n [7]int
	k := 0
	if haveAVX2 && len(x) >= 8 {
		k = len(x) / 8 * 8
		var tm1 [7]int32
		for j, t := range tk {
			tm1[j] = int32(t) - 1
		}
		for b := 0; b < k; b += 1 << 30 {
			var out [7]int
			countGE7AVX2(&x[b], min(k-b, 1<<30), &tm1, &out)
			for j, c := range out {
				n[j] += c
			}
		}
	}
	for j := range n {
		n[j] += countGEGo(x[k:], tk[j])
	}
	return n
}

// countGEGo is one of countGE3's counts in pure Go.
func countGEGo(x []float32, tk uint32) int {
	n := 0
	for _, v := range x {
		if magKey(v) >= tk {
			n++
		}
	}
	return n
}

// splitGE appends to a1 lo + the positions in x whose magnitude key is
// ≥ t1, and to a2 those in [t2, t1), both ascending (t2 ≤ t1 ≤
// 0x7f800001).
func splitGE(x []float32, lo int, t1, t2 uint32, a1, a2 []uint32) ([]uint32, []uint32) {
	eachGE(x, t2, func(i int) bool {
		if magKey(x[i]) >= t1 {
			a1 = append(a1, uint32(lo+i))
		} else {
			a2 = append(a2, uint32(lo+i))
		}
		return true
	})
	return a1, a2
}

// eachGE calls f with the positions in x, ascending, whose magnitude key
// is ≥ t (t ≥ 1), until f returns false; it reports whether f always
// returned true. Where the CPU has AVX2, geMaskAVX2 marks those elements
// 32 at a time and only they are looked at (in top-k they are few: the k
// largest and a band below them).
func eachGE(x []float32, t uint32, f func(i int) bool) bool {
	k := 0
	if haveAVX2 && len(x) >= 32 {
		k = len(x) / 32 * 32
		var masks [64]uint32 // 2048 elements a call
		for b := 0; b < k; b += 32 * len(masks) {
			m := min(len(masks), (k-b)/32)
			geMaskAVX2(&x[b], 32*m, int32(t)-1, &masks[0])
			for w, bits := range masks[:m] {
				for bits != 0 {
					if !f(b + 32*w + trailingZeros(uint64(bits))) {
						return false
					}
					bits &= bits - 1
				}
			}
		}
	}
	for i := k; i < len(x); i++ {
		if magKey(x[i]) >= t && !f(i) {
			return false
		}
	}
	return true
}

// maxMagSeq is the largest magnitude key of x on this goroutine:
// maxMagAVX2 for the leading multiple of 32 where the CPU has AVX2,
// maxMagGo for the rest.
func maxMagSeq(x []float32) uint32 {
	k, m := 0, uint32(0)
	if haveAVX2 && len(x) >= 32 {
		k = len(x) / 32 * 32
		m = maxMagAVX2(&x[0], k)
	}
	return max(m, maxMagGo(x[k:]))
}
