package codec

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"trainwire.dev/lib/rng"
)

// The amd64 kernels against their pure-Go twins, byte for byte (and
// bit for bit on the float64 sums), on awkward lengths, unaligned
// slices and the special values. On other platforms (or -tags purego)
// both sides are the Go kernels and the tests still check the dispatch.

// awkward returns n floats mixing every exponent, the specials and, with
// bad set, NaN and ±Inf.
func awkward(r *rand.Rand, n int, bad bool) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch r.IntN(8) {
		case 0:
			x[i] = specials[r.IntN(len(specials))]
		case 1:
			x[i] = math.Float32frombits(r.Uint32() & 0x807fffff) // ±0 and denormals
		case 2:
			x[i] = float32(r.NormFloat64())
		default:
			x[i] = math.Float32frombits(r.Uint32()&^0x7f800000 | uint32(r.IntN(255))<<23)
		}
	}
	if bad && n > 0 {
		for range 1 + r.IntN(3) {
			x[r.IntN(n)] = []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
				math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000)}[r.IntN(5)]
		}
	}
	return x
}

// checkKernels compares every dispatched kernel with its Go twin on x.
func checkKernels(t *testing.T, x []float32) {
	t.Helper()
	n := len(x)
	a := make([]byte, packedLen(int64(n)))
	b := make([]byte, len(a))
	ok, s, sa := signSums(a, x)
	wok, ws, wsa := signSumsGo(b, x, 0, 0)
	if ok != wok || !bytes.Equal(a, b) {
		t.Fatalf("n=%d: signSums ok=%v bits % x, Go ok=%v % x", n, ok, a[:min(8, len(a))], wok, b[:min(8, len(b))])
	}
	if ok && (math.Float64bits(s) != math.Float64bits(ws) || math.Float64bits(sa) != math.Float64bits(wsa)) {
		t.Fatalf("n=%d: signSums sums %v %v, Go %v %v", n, s, sa, ws, wsa)
	}
	if ok != finite(x) {
		t.Fatalf("n=%d: signSums ok=%v for finite=%v", n, ok, finite(x))
	}
	clear(a)
	clear(b)
	ok, wok = signBitsInto(a, x), signBitsGo(b, x)
	if ok != wok || ok != finite(x) || !bytes.Equal(a, b) {
		t.Fatalf("n=%d: signBitsInto ok=%v bits % x, Go ok=%v % x", n, ok, a[:min(8, len(a))], wok, b[:min(8, len(b))])
	}
	h := make([]byte, 2*n)
	g := make([]byte, 2*n)
	ok, wok = f16Into(h, x), f16Go(g, x)
	if ok != wok || ok != finite(x) {
		t.Fatalf("n=%d: f16Into ok=%v, Go ok=%v, finite=%v", n, ok, wok, finite(x))
	}
	for i, v := range x {
		got, want := binary.LittleEndian.Uint16(h[2*i:]), binary.LittleEndian.Uint16(g[2*i:])
		if got != want || got != F32ToF16(v) {
			t.Fatalf("n=%d: fp16 of %v (%#08x) = %#04x, Go %#04x, F32ToF16 %#04x", n, v, math.Float32bits(v), got, want, F32ToF16(v))
		}
	}
	if n > 0 {
		hs := aligned64(2 * n)
		if ok2 := f16IntoStream(hs, x); ok2 != wok || !bytes.Equal(hs, g) {
			t.Fatalf("n=%d: f16IntoStream ok=%v differs from f16Go (ok=%v)", n, ok2, wok)
		}
	}
	clear(h)
	clear(g)
	ok, wok = bf16Into(h, x), n == 0 || bf16Fast(g, x)
	if ok != wok || ok != finite(x) || !bytes.Equal(h, g) {
		t.Fatalf("n=%d: bf16Into ok=%v, bf16Fast ok=%v, finite=%v, equal bytes %v", n, ok, wok, finite(x), bytes.Equal(h, g))
	}
	if n > 0 {
		hs := aligned64(2 * n)
		if ok2 := bf16IntoStream(hs, x); ok2 != wok || !bytes.Equal(hs, g) {
			t.Fatalf("n=%d: bf16IntoStream ok=%v differs from bf16Fast (ok=%v)", n, ok2, wok)
		}
	}
	if ok {
		for i, v := range x {
			if got := binary.LittleEndian.Uint16(h[2*i:]); got != F32ToBF16(v) {
				t.Fatalf("n=%d: bf16 of %v (%#08x) = %#04x, F32ToBF16 %#04x", n, v, math.Float32bits(v), got, F32ToBF16(v))
			}
		}
	}
	if got, want := maxMag(x, 3), maxMagGo(x); got != want {
		t.Fatalf("n=%d: maxMag %#x, Go %#x", n, got, want)
	}
	if s := math.Float32frombits(maxMagGo(x)); finite(x) && s > 0 {
		nb := int(packedLen(int64(n)))
		for _, inv := range []float64{1 / float64(s), 3 / float64(s)} {
			for _, lo := range []int{0, 8, 16} {
				if lo > n {
					continue
				}
				key := uint64(n)*0x9E3779B97F4A7C15 + uint64(lo)
				b1, b2 := make([]byte, 2*nb), make([]byte, 2*nb)
				ternBits(b1, nb, x, lo, n, inv, key)
				ternBitsGo(b2, nb, x, lo, n, inv, key)
				if !bytes.Equal(b1, b2) {
					t.Fatalf("n=%d lo=%d inv=%v avx512=%v: ternBits % x, Go % x", n, lo, inv, haveAVX512, b1[:min(8, len(b1))], b2[:min(8, len(b2))])
				}
			}
		}
	}
	for _, i0 := range []int{0, 5} {
		c1, c2 := make([]byte, n), make([]byte, n)
		key := uint64(n) + uint64(i0)<<32
		ok1, ok2 := naturalCodes(c1, x, i0, key), naturalCodesGo(c2, x, i0, key)
		if ok1 != ok2 || ok1 != finite(x) || (ok1 && !bytes.Equal(c1, c2)) {
			t.Fatalf("n=%d i0=%d avx512=%v: naturalCodes ok=%v, Go ok=%v, finite=%v", n, i0, haveAVX512, ok1, ok2, finite(x))
		}
	}
	if n > 0 {
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*n)
		for _, b := range [][]byte{raw, raw[1:], raw[:4*n-3]} {
			if got, want := maxAbsI8(b), maxAbsI8Go(b); got != want {
				t.Fatalf("n=%d: maxAbsI8 %d, Go %d", n, got, want)
			}
		}
		d1, d2 := make([]float32, 2*n), make([]float32, 2*n)
		bf16Decode(d1, raw)
		bf16DecodeGo(d2, raw)
		for i := range d1 {
			if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) {
				t.Fatalf("n=%d: bf16Decode[%d] %#08x, Go %#08x", n, i, math.Float32bits(d1[i]), math.Float32bits(d2[i]))
			}
		}
		naturalDecode(d1, raw[:len(d1)])
		naturalDecodeGo(d2, raw[:len(d2)])
		for i := range d1 {
			if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) {
				t.Fatalf("n=%d: naturalDecode[%d] of %#02x: %#08x, Go %#08x", n, i, raw[i], math.Float32bits(d1[i]), math.Float32bits(d2[i]))
			}
		}
		f16Decode(d1, raw)
		f16DecodeGo(d2, raw)
		for i := range d1 {
			if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) {
				t.Fatalf("n=%d: f16Decode[%d] of %#04x: %#08x, Go %#08x", n, i, uint16(raw[2*i])|uint16(raw[2*i+1])<<8, math.Float32bits(d1[i]), math.Float32bits(d2[i]))
			}
		}
	}
	// TernGrad's decoder on planes made of x's bytes (both planes may be
	// set: plane 1 wins, as in the Go twin).
	if n >= 2 {
		raw := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*n)
		nb := 2 * n
		for _, lo := range []int{0, 8, 24} {
			if lo > 8*nb {
				continue
			}
			m := 8*nb - lo - n%8
			d1, d2 := make([]float32, m), make([]float32, m)
			ternDecode(d1, raw, nb, lo, x[0])
			ternDecodeGo(d2, raw, nb, lo, x[0])
			for i := range d1 {
				if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) {
					t.Fatalf("n=%d lo=%d: ternDecode[%d] %v, Go %v", n, lo, i, d1[i], d2[i])
				}
			}
		}
	}
	// qsgd's decoder on codes made of x's bytes (every int8), with the
	// scale taken from x.
	if n > 0 {
		codes := unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), n)
		u := x[n/2]
		d1, d2 := make([]float32, n), make([]float32, n)
		qsgdDecode(d1, codes, u)
		qsgdDecodeGo(d2, codes, u)
		for i := range d1 {
			if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) && !(d1[i] != d1[i] && d2[i] != d2[i]) {
				t.Fatalf("n=%d: qsgdDecode[%d] = %v, Go %v (code %d, u %v)", n, i, d1[i], d2[i], int8(codes[i]), u)
			}
		}
	}
	if n > 0 && ok {
		ss := sumSquaresGo(x)
		norm := float32(math.Sqrt(ss))
		if bl := n / 8 / 4 * 4; haveAVX2 && bl > 0 {
			var got [8]float64
			sumSquares8AVX2(&x[0], bl, &got)
			for b := range got {
				if want := sumSquaresGo(x[b*bl : (b+1)*bl]); math.Float64bits(got[b]) != math.Float64bits(want) {
					t.Fatalf("n=%d: sumSquares8AVX2 block %d = %v, Go %v", n, b, got[b], want)
				}
			}
		}
		for _, levels := range []int64{1, 7, 127} {
			if norm == 0 || math.IsInf(float64(norm), 0) {
				break
			}
			sc24 := float32(float64(levels) / float64(norm) * (1 << 24))
			c1, c2 := make([]byte, n), make([]byte, n)
			qsgdBlockGo(c2, x, sc24, uint32(levels)<<24, uint64(n)*31+uint64(levels))
			for _, stream := range []bool{false, true} {
				qsgdBlock(c1, x, sc24, uint32(levels)<<24, uint64(n)*31+uint64(levels), stream)
				if !bytes.Equal(c1, c2) {
					t.Fatalf("n=%d levels=%d stream=%v: qsgdBlock differs from qsgdBlockGo", n, levels, stream)
				}
			}
		}
	}
	checkSignum(t, x)
}

// checkSignum compares signumInto with signumGo on a finite x, the
// momentum taken from x reversed: the momenta bit for bit and the bits.
func checkSignum(t *testing.T, x []float32) {
	t.Helper()
	if !finite(x) {
		return
	}
	m1, m2 := slices.Clone(x), slices.Clone(x)
	slices.Reverse(m1)
	slices.Reverse(m2)
	d1, d2 := make([]byte, packedLen(int64(len(x)))), make([]byte, packedLen(int64(len(x))))
	for _, beta := range []float32{0.9, 0.5} {
		signumInto(d1, m1, x, beta, 1-beta)
		signumGo(d2, m2, x, beta, 1-beta)
		for i := range m1 {
			if math.Float32bits(m1[i]) != math.Float32bits(m2[i]) {
				t.Fatalf("n=%d beta=%v: signumInto m[%d] = %#08x, Go %#08x", len(x), beta, i, math.Float32bits(m1[i]), math.Float32bits(m2[i]))
			}
		}
		if !bytes.Equal(d1, d2) {
			t.Fatalf("n=%d beta=%v: signumInto bits % x, Go % x", len(x), beta, d1[:min(8, len(d1))], d2[:min(8, len(d2))])
		}
	}
}

func finite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// eachISA runs f with every kernel level this CPU has: the AVX-512
// kernels where present, then the AVX2 ones (and the Go ones elsewhere).
func eachISA(t testing.TB, f func()) {
	t.Helper()
	if haveAVX512 {
		f()
		haveAVX512 = false
		defer func() { haveAVX512 = true }()
	}
	f()
}

func TestKernelsAsmTwin(t *testing.T) {
	t.Logf("haveAVX2=%v haveF16C=%v haveAVX512=%v", haveAVX2, haveF16C, haveAVX512)
	eachISA(t, func() { testKernelsAsmTwin(t) })
}

func testKernelsAsmTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	lens := []int{0, 1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 95, 96, 127, 128, 129, 1000, 4099, 1<<16 + 37}
	for n := 2; n < 300; n += 7 {
		lens = append(lens, n)
	}
	for _, n := range lens {
		for _, off := range []int{0, 1, 3} {
			for _, bad := range []bool{false, true} {
				buf := awkward(r, n+off, false)
				x := buf[off:]
				if bad {
					copy(x, awkward(r, n, true))
				}
				checkKernels(t, x)
			}
		}
	}
	// Every float32 exponent in every lane position, both signs.
	x := make([]float32, 0, 2*256*40)
	for e := range uint32(256) {
		for k := range uint32(40) {
			m := k * 0x1ffff
			x = append(x, math.Float32frombits(e<<23|m), math.Float32frombits(1<<31|e<<23|m))
		}
	}
	checkKernels(t, x)
	for i := range x {
		if math.IsNaN(float64(x[i])) || math.IsInf(float64(x[i]), 0) {
			x[i] = 1
		}
	}
	checkKernels(t, x)
}

func TestSumSquaresBlocksTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(43, 44))
	for _, n := range []int{8 * blockLen, 17*blockLen + 5, 9*blockLen - 1} {
		x := awkward(r, n, false)
		want := blockReduce(x, 1, sumSquaresGo)
		for _, w := range []int{1, 2, 3} {
			got := sumSquaresBlocks(x, w)
			for b := range want {
				if math.Float64bits(got[b]) != math.Float64bits(want[b]) {
					t.Fatalf("n=%d workers=%d block %d: %v, Go %v", n, w, b, got[b], want[b])
				}
			}
		}
	}
}

func FuzzKernelsAsm(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x7f, 1, 2, 3, 4}, uint8(0))
	f.Add(bytes.Repeat([]byte{0x01, 0x00, 0x80, 0x80}, 70), uint8(1))
	f.Add(bytes.Repeat([]byte{0xff, 0xef, 0x7f, 0x47}, 99), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, off uint8) {
		o := int(off % 4)
		x := make([]float32, len(data)/4+o)[o:]
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
		}
		eachISA(t, func() { checkKernels(t, x) })
	})
}

// TestQSGDAsmEdges: the qsgd kernels against qsgdRef where the rounding
// is tight: |x| equal to the norm (|x|·sc24 a hair above s·2^24, clamped),
// levels landing exactly on a boundary, tiny and huge norms, every level
// count that changes the clamp, odd lengths and unaligned slices.
func TestQSGDAsmEdges(t *testing.T) {
	r := rand.New(rand.NewPCG(45, 46))
	eachISA(t, func() {
		for _, levels := range []uint32{1, 2, 3, 63, 64, 100, 127} {
			for trial := range 40 {
				n := 1 + r.IntN(300)
				off := r.IntN(4)
				x := awkward(r, n+off, false)[off:]
				for i := range x {
					if math.IsNaN(float64(x[i])) || math.IsInf(float64(x[i]), 0) {
						x[i] = 0
					}
				}
				var norm float64
				switch trial % 4 {
				case 0: // a lone element at the norm
					clear(x)
					v := float32(r.NormFloat64()) * float32(math.Ldexp(1, r.IntN(200)-100))
					x[r.IntN(n)] = v
					norm = math.Abs(float64(v))
				case 1: // the largest magnitude as the norm
					for _, v := range x {
						norm = max(norm, math.Abs(float64(v)))
					}
				case 2: // boundaries: x = k/s·norm exactly representable
					norm = 1
					for i := range x {
						x[i] = float32(r.IntN(int(levels)+1)) / float32(levels)
						if r.IntN(2) == 0 {
							x[i] = -x[i]
						}
					}
				default:
					norm = math.Sqrt(sumSquaresGo(x))
				}
				if norm == 0 {
					continue
				}
				sc24 := float32(float64(levels) / norm * (1 << 24))
				if math.IsInf(float64(sc24), 0) {
					continue
				}
				seed := r.Uint64()
				got := make([]byte, n)
				if trial%2 == 0 {
					got = aligned64(n) // the non-temporal path
				}
				qsgdBlock(got, x, sc24, levels<<24, seed, trial%2 == 0)
				if want := qsgdRef(x, sc24, levels<<24, seed); !bytes.Equal(got, want) {
					t.Fatalf("avx512=%v levels=%d n=%d trial %d: qsgdBlock differs from qsgdRef", haveAVX512, levels, n, trial)
				}
			}
		}
	})
}

// TestTernAsm: ternBits against ternBitsGo on Gaussian data, where most
// elements have a real chance of being sent, and with a clip (p > 1).
func TestTernAsm(t *testing.T) {
	eachISA(t, func() {
		for _, n := range []int{16, 17, 31, 32, 100, 1000, 4103} {
			x := gauss(n, uint64(n))
			x[0] = float32(math.Copysign(0, -1))
			x[n-1] = 0
			s := math.Float32frombits(maxMagGo(x))
			nb := int(packedLen(int64(n)))
			for _, inv := range []float64{1 / float64(s), 2.5 / float64(s)} {
				for _, lo := range []int{0, 8} {
					b1, b2 := make([]byte, 2*nb), make([]byte, 2*nb)
					ternBits(b1, nb, x, lo, n, inv, uint64(n)+7)
					ternBitsGo(b2, nb, x, lo, n, inv, uint64(n)+7)
					if !bytes.Equal(b1, b2) {
						t.Fatalf("n=%d lo=%d inv=%v avx512=%v: ternBits differs from ternBitsGo", n, lo, inv, haveAVX512)
					}
				}
			}
		}
	})
}

// TestNaturalAsm: naturalCodes against naturalCodesGo on data around every
// branch: zeros, denormals, magnitudes below 2^-99, the 2^27 saturation
// and Gaussian values.
func TestNaturalAsm(t *testing.T) {
	r := rand.New(rand.NewPCG(47, 48))
	eachISA(t, func() {
		for _, n := range []int{16, 17, 33, 100, 1000, 4111} {
			x := make([]float32, n)
			for i := range x {
				switch r.IntN(6) {
				case 0:
					x[i] = math.Float32frombits(r.Uint32() & 0x807fffff) // ±0, denormals
				case 1:
					x[i] = math.Float32frombits(r.Uint32()&0x807fffff | uint32(r.IntN(32))<<23) // below 2^-99 and around it
				case 2:
					x[i] = math.Float32frombits(r.Uint32()&0x807fffff | uint32(148+r.IntN(107))<<23) // around 2^27 and above
				default:
					x[i] = float32(r.NormFloat64())
				}
			}
			for _, i0 := range []int{0, 1 << 20} {
				c1, c2 := make([]byte, n), make([]byte, n)
				if !naturalCodes(c1, x, i0, uint64(n)) || !naturalCodesGo(c2, x, i0, uint64(n)) {
					t.Fatalf("n=%d: finite data reported non-finite", n)
				}
				for i := range c1 {
					if c1[i] != c2[i] {
						t.Fatalf("n=%d i0=%d avx512=%v: code[%d] of %v (%#08x) = %#02x, Go %#02x", n, i0, haveAVX512, i, x[i], math.Float32bits(x[i]), c1[i], c2[i])
					}
				}
			}
		}
	})
}

// aligned64 returns n zero bytes starting at a multiple of 64.
func aligned64(n int) []byte {
	b := make([]byte, n+64)
	off := (64 - int(uintptr(unsafe.Pointer(&b[0]))%64)) % 64
	return b[off : off+n : off+n]
}

// TestQSGDLarge: a tensor past streamMin (non-temporal stores, the output
// allocated beside the norm pass, blocks from a shared counter) encodes
// to the bytes of the plain Go kernels, for any number of workers.
func TestQSGDLarge(t *testing.T) {
	n := streamMin + 1000
	x := gauss(n, 77)
	var want []byte
	for _, w := range []int{1, 2, 3} {
		c := mustNew(t, "qsgd", Options{Levels: 100, Seed: 5, Workers: w})
		f, err := c.Encode(Input{Name: "big", Step: 3, Data: x})
		if err != nil {
			t.Fatal(err)
		}
		if want == nil {
			norm := math.Float32frombits(binary.LittleEndian.Uint32(f.Parts[0].Data))
			sc24 := float32(100 / float64(norm) * (1 << 24))
			key := rng.Key(5, 3, "big", rng.PurposeRound)
			want = make([]byte, n)
			for k := 0; k*blockLen < n; k++ {
				e := min((k+1)*blockLen, n)
				qsgdBlockGo(want[k*blockLen:e], x[k*blockLen:e], sc24, 100<<24, rng.Draw(key, uint64(k)))
			}
		}
		if !bytes.Equal(f.Parts[1].Data, want) {
			t.Fatalf("workers=%d: codes differ from the Go kernels", w)
		}
	}
}

// TestF16DecodeEveryHalf: the F16C decoder and its Go twin agree on all
// 65536 halves (subnormals, ±Inf, every NaN payload), at every offset
// the dispatcher splits at.
func TestF16DecodeEveryHalf(t *testing.T) {
	src := make([]byte, 2<<16)
	for h := range 1 << 16 {
		src[2*h], src[2*h+1] = byte(h), byte(h>>8)
	}
	for _, off := range []int{0, 1, 31} {
		b := src[2*off:]
		d1, d2 := make([]float32, len(b)/2), make([]float32, len(b)/2)
		f16Decode(d1, b)
		f16DecodeGo(d2, b)
		for i := range d1 {
			h := uint16(b[2*i]) | uint16(b[2*i+1])<<8
			if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) || math.Float32bits(d2[i]) != math.Float32bits(F16ToF32(h)) {
				t.Fatalf("half %#04x: f16Decode %#08x, Go %#08x, F16ToF32 %#08x", h, math.Float32bits(d1[i]), math.Float32bits(d2[i]), math.Float32bits(F16ToF32(h)))
			}
		}
	}
}

// TestNaturalDecodeEveryCode: the AVX2 decoder, its Go twin and
// naturalValue agree on all 256 codes at every offset the dispatcher
// splits at.
func TestNaturalDecodeEveryCode(t *testing.T) {
	src := make([]byte, 256*3)
	for i := range src {
		src[i] = byte(i)
	}
	for _, off := range []int{0, 1, 15} {
		b := src[off:]
		d1, d2 := make([]float32, len(b)), make([]float32, len(b))
		naturalDecode(d1, b)
		naturalDecodeGo(d2, b)
		for i, c := range b {
			if math.Float32bits(d1[i]) != math.Float32bits(d2[i]) || math.Float32bits(d2[i]) != math.Float32bits(naturalValue(c)) {
				t.Fatalf("code %#02x: naturalDecode %#08x, Go %#08x, naturalValue %#08x", c, math.Float32bits(d1[i]), math.Float32bits(d2[i]), math.Float32bits(naturalValue(c)))
			}
		}
	}
}

// TestCountGE: the AVX2 counts and their Go twin agree, and splitGE's
// masks find exactly the positions a plain loop does, for thresholds at,
// just above and just below every key of the data, 0, and +Inf's
// KeyCeil, at lengths around the unrolling.
func TestCountGE(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 64, 100, 1000, 4099} {
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(r.Uint32()&^0x7f800000 | uint32(r.IntN(255))<<23)
		}
		copy(x, specials[:min(n, len(specials))]) // all finite
		tks := []uint32{0, 1, 0x7f800000, 0x7f800001, KeyCeil(math.Inf(1))}
		for _, v := range x[:min(n, 50)] {
			k := magKey(v)
			tks = append(tks, k, k+1, k-1)
		}
		for j, tk := range tks {
			if tk > 0x7f800001 {
				continue
			}
			three := [3]uint32{tk, tks[(j+1)%len(tks)], tks[(j+7)%len(tks)]}
			for m := range three {
				three[m] = min(three[m], 0x7f800001)
			}
			got := countGE3(x, three)
			for m, tm := range three {
				if want := countGEGo(x, tm); got[m] != want {
					t.Fatalf("n=%d tk=%#x: countGE3 %d, Go %d", n, tm, got[m], want)
				}
			}
			var seven [7]uint32
			for m := range seven {
				seven[m] = min(tks[(j+3*m)%len(tks)], 0x7f800001)
			}
			got7 := countGE7(x, seven)
			for m, tm := range seven {
				if want := countGEGo(x, tm); got7[m] != want {
					t.Fatalf("n=%d tk=%#x (%d of 7): countGE7 %d, Go %d", n, tm, m, got7[m], want)
				}
			}
			// splitGE with tk as t2 and the next threshold up as t1
			t1 := min(tk+uint32(r.IntN(1<<24)), 0x7f800001)
			a1, a2 := splitGE(x, 7, t1, tk, nil, nil)
			var w1, w2 []uint32
			for i, v := range x {
				if kk := magKey(v); kk >= t1 {
					w1 = append(w1, uint32(7+i))
				} else if kk >= tk {
					w2 = append(w2, uint32(7+i))
				}
			}
			if !slices.Equal(a1, w1) || !slices.Equal(a2, w2) {
				t.Fatalf("n=%d t1=%#x t2=%#x: splitGE %d+%d positions, want %d+%d", n, t1, tk, len(a1), len(a2), len(w1), len(w2))
			}
		}
	}
}
