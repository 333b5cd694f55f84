package codec

import (
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// specials are floats on every boundary of the half and bfloat16 paths.
var specials = []float32{0, float32(math.Copysign(0, -1)), 1, -1, 65504, 65519.99, 65520, -65520, 0x1p-14, 0x1.ffcp-15,
	0x1p-24, 0x1p-25, 0x1.8p-25, 1e-10, math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 0x1.fffep-15,
	0x1.0018p0, 0x1.0008p0, 3.4e38}

func TestHalfKernelsTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	x := append([]float32{}, specials...)
	for range 300000 {
		x = append(x, math.Float32frombits(r.Uint32()&^0x7f800000|uint32(r.IntN(255))<<23))
	}
	h := make([]byte, 2*len(x))
	if !f16Fast(h, x) {
		t.Fatal("f16Fast: finite input reported non-finite")
	}
	for i, v := range x {
		if got, want := uint16(h[2*i])|uint16(h[2*i+1])<<8, F32ToF16(v); got != want {
			t.Fatalf("f16Fast(%v) = %#04x, F32ToF16 %#04x", v, got, want)
		}
	}
	if !bf16Fast(h, x) {
		t.Fatal("bf16Fast: finite input reported non-finite")
	}
	for i, v := range x {
		if got, want := uint16(h[2*i])|uint16(h[2*i+1])<<8, F32ToBF16(v); got != want {
			t.Fatalf("bf16Fast(%v) = %#04x, F32ToBF16 %#04x", v, got, want)
		}
	}
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		y := append([]float32{1, 2, 3}, bad)
		if f16Fast(make([]byte, 8), y) || bf16Fast(make([]byte, 8), y) || packSignBits(make([]byte, 1), y) {
			t.Errorf("%v not reported", bad)
		}
		if ok, _ := packSignBitsAbs(make([]byte, 1), y); ok {
			t.Errorf("%v not reported by packSignBitsAbs", bad)
		}
		z := gauss(100000, 1)
		z[99999] = bad
		if _, ok := topK(z, 10, 2); ok {
			t.Errorf("topK: %v not reported", bad)
		}
	}
}

func TestSignAbsTwin(t *testing.T) {
	for _, n := range []int{0, 5, 8, 13, 1000} {
		x := gauss(n, uint64(n))
		a := make([]byte, packedLen(int64(n)))
		b := make([]byte, len(a))
		ok, s := packSignBitsAbs(a, x)
		packSignRef(b, x)
		var want float64
		for _, v := range x {
			want += math.Abs(float64(v))
		}
		if !ok || !reflect.DeepEqual(a, b) || math.Abs(s-want) > 1e-9*want {
			t.Fatalf("n=%d: bits % x vs % x, sum %v vs %v", n, a, b, s, want)
		}
	}
}

// TestWorkersDoNotMatter: every codec writes identical frames with 1 and
// 3 goroutines (reductions are per fixed block, draws per element).
func TestWorkersDoNotMatter(t *testing.T) {
	x := gauss(5*blockLen+77, 8)
	for _, algo := range Algos() {
		var frames []any
		for _, w := range []int{1, 3} {
			f, err := mustNew(t, algo, Options{Workers: w, Seed: 4}).Encode(Input{Name: "w", Step: 2, Data: x})
			if err != nil {
				t.Fatal(err)
			}
			frames = append(frames, f)
		}
		if !reflect.DeepEqual(frames[0], frames[1]) {
			t.Errorf("%s: frames differ between 1 and 3 workers", algo)
		}
	}
}

func TestWordKernelsTwin(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	for _, n := range []int{2, 8, 16, 24, 1000, 4096 + 5} {
		x := make([]float32, n)
		for i := range x {
			x[i] = math.Float32frombits(r.Uint32()&^0x7f800000 | uint32(r.IntN(255))<<23)
		}
		copy(x, specials[:min(n, len(specials))])
		a := make([]byte, packedLen(int64(n)))
		b := make([]byte, len(a))
		if !signBitsInto(a, x) {
			t.Fatal("signBitsInto: finite input reported non-finite")
		}
		packSignRef(b, x)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("n=%d: signBitsInto % x, ref % x", n, a[:min(8, len(a))], b[:min(8, len(b))])
		}
		h := make([]byte, 2*n)
		if !f16Into(h, x) {
			t.Fatal("f16Into: finite input reported non-finite")
		}
		for i, v := range x {
			if got, want := uint16(h[2*i])|uint16(h[2*i+1])<<8, F32ToF16(v); got != want {
				t.Fatalf("f16Into(%v) = %#04x, want %#04x", v, got, want)
			}
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
			y := append([]float32{}, x...)
			y[n-1] = bad
			if signBitsInto(a, y) || f16Into(h, y) {
				t.Fatalf("n=%d: %v not reported", n, bad)
			}
		}
		neg, pos, cnt := splitSums(x[:min(n, 100)])
		var wn, wp float64
		wc := 0
		for _, v := range x[:min(n, 100)] {
			if math.Signbit(float64(v)) {
				wn += float64(v)
				wc++
			} else {
				wp += float64(v)
			}
		}
		if cnt != wc || math.Abs(neg-wn) > 1e-6*math.Abs(wn)+1e-30 || math.Abs(pos-wp) > 1e-6*math.Abs(wp)+1e-30 {
			t.Fatalf("splitSums: %v %v %d, want %v %v %d", neg, pos, cnt, wn, wp, wc)
		}
	}
}

// qsgdRef is qsgdBlock's plain twin, with branches.
func qsgdRef(x []float32, sc24 float32, maxT uint32, seed uint64) []byte {
	out := make([]byte, len(x))
	g := wyrand(seed)
	var r uint64
	for i, v := range x {
		var u uint32
		if i%2 == 0 {
			r = g.next()
			u = uint32(r >> 40)
		} else {
			u = uint32(r>>16) & 0xffffff
		}
		t := uint32(float32(math.Abs(float64(v))) * sc24)
		if t > maxT {
			t = maxT
		}
		l := int(t >> 24)
		if u < t&0xffffff {
			l++
		}
		if math.Signbit(float64(v)) {
			l = -l
		}
		out[i] = byte(int8(l))
	}
	return out
}

func TestQSGDTwin(t *testing.T) {
	for _, n := range []int{1, 2, 3, 1000, 4097} {
		x := gauss(n, uint64(n))
		x[0] = float32(math.Copysign(0, -1))
		sc24 := float32(7.0 / 3 * (1 << 24))
		got := make([]byte, n)
		qsgdBlock(got, x, sc24, 7<<24, 11, n > 1000)
		if want := qsgdRef(x, sc24, 7<<24, 11); !reflect.DeepEqual(got, want) {
			t.Fatalf("n=%d: qsgdBlock differs from qsgdRef", n)
		}
	}
}

func TestSignSumsTwin(t *testing.T) {
	for _, n := range []int{0, 3, 8, 17, 5000} {
		x := gauss(n, uint64(n)+1)
		a := make([]byte, packedLen(int64(n)))
		b := make([]byte, len(a))
		ok, s, sa := signSums(a, x)
		ws, wa := signSumsRef(b, x)
		if !ok || !reflect.DeepEqual(a, b) || math.Abs(s-ws) > 1e-5*wa+1e-9 || math.Abs(sa-wa) > 1e-6*wa+1e-9 {
			t.Fatalf("n=%d: sums %v %v, want %v %v", n, s, sa, ws, wa)
		}
	}
}

func TestF16DecodeTable(t *testing.T) {
	x := gauss(1<<16+3, 9)
	x[0], x[1] = 1e-7, -70000
	f, err := mustNew(t, "fp16", Options{}).Encode(Input{Name: "w", Data: x})
	if err != nil {
		t.Fatal(err)
	}
	y, err := Decode(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range x {
		if want := F16ToF32(F32ToF16(v)); math.Float32bits(y[i]) != math.Float32bits(want) {
			t.Fatalf("element %d: %v, want %v", i, y[i], want)
		}
	}
}
