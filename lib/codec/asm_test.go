package codec

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
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
			qsgdBlock(c1, x, sc24, uint32(levels)<<24, uint64(n)*31+uint64(levels))
			qsgdBlockGo(c2, x, sc24, uint32(levels)<<24, uint64(n)*31+uint64(levels))
			if !bytes.Equal(c1, c2) {
				t.Fatalf("n=%d levels=%d: qsgdBlock differs from qsgdBlockGo", n, levels)
			}
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

func TestKernelsAsmTwin(t *testing.T) {
	t.Logf("haveAVX2=%v haveF16C=%v", haveAVX2, haveF16C)
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
		checkKernels(t, x)
	})
}
