package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// specials are the values every kernel test includes.
var specials = []float32{
	0, float32(math.Copysign(0, -1)), 1, -1, math.MaxFloat32, -math.MaxFloat32,
	math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32,
	float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		if rng.IntN(8) == 0 {
			v[i] = specials[rng.IntN(len(specials))]
		} else {
			v[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10)))
		}
	}
	return v
}

// sameFloat is bit equality, except that any NaN equals any NaN (the
// payload the hardware propagates may depend on operand order).
func sameFloat(a, b float32) bool {
	if a != a && b != b {
		return true
	}
	return math.Float32bits(a) == math.Float32bits(b)
}

func requireSame(t *testing.T, want, got []float32) {
	t.Helper()
	require.Equal(t, len(want), len(got))
	for i := range want {
		if !sameFloat(want[i], got[i]) {
			t.Fatalf("element %d: want %v (%#08x), got %v (%#08x)", i, want[i], math.Float32bits(want[i]), got[i], math.Float32bits(got[i]))
		}
	}
}

var lengths = []int{0, 1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 1000, 4099}

func TestAddMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range lengths {
		dst, src := randVec(rng, n), randVec(rng, n)
		want := append([]float32(nil), dst...)
		for i := range want {
			want[i] += src[i]
		}
		Add(dst, src)
		requireSame(t, want, dst)
	}
}

func TestAddSubslices(t *testing.T) {
	// Unaligned starts exercise the assembly's head and tail handling.
	rng := rand.New(rand.NewPCG(3, 4))
	base, src := randVec(rng, 200), randVec(rng, 200)
	for off := range 5 {
		dst := append([]float32(nil), base...)
		want := append([]float32(nil), base...)
		for i := off; i < 150; i++ {
			want[i] += src[i-off+1]
		}
		Add(dst[off:150], src[1:150-off+1])
		requireSame(t, want, dst)
	}
}

func TestAddLengthMismatchPanics(t *testing.T) {
	require.Panics(t, func() { Add(make([]float32, 3), make([]float32, 4)) })
}

func TestScaleMatchesLoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range lengths {
		for _, alpha := range []float32{0, 1, -1, 0.5, 3.25, 1e-30, float32(math.Inf(1))} {
			dst := randVec(rng, n)
			want := append([]float32(nil), dst...)
			for i := range want {
				want[i] *= alpha
			}
			Scale(dst, alpha)
			requireSame(t, want, dst)
		}
	}
}

func TestCopy(t *testing.T) {
	dst := make([]float32, 3)
	require.Equal(t, 3, Copy(dst, []float32{1, 2, 3, 4}))
	require.Equal(t, []float32{1, 2, 3}, dst)
	require.Equal(t, 0, Copy(nil, []float32{1}))
}

// TestViewsMatchPortable is the differential test between the build's
// Bytes/Float32s (zero-copy on little-endian hosts) and the portable
// encoding/binary twins used on big-endian hosts and with -tags purego.
func TestViewsMatchPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range lengths {
		f := randVec(rng, n)
		b := Bytes(f)
		require.Equal(t, bytesPortable(f), b, "n=%d", n)
		requireSame(t, float32sPortable(b), Float32s(b))
		requireSame(t, f, Float32s(b))
		// Round trip through the portable twins too.
		requireSame(t, f, float32sPortable(bytesPortable(f)))
	}
	require.Nil(t, Bytes(nil))
	require.Nil(t, Float32s(nil))
	require.Equal(t, bytesPortable(nil), Bytes(nil))
}

func TestBytesLayout(t *testing.T) {
	f := []float32{1, -2, float32(math.Copysign(0, -1))}
	want := []byte{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0, 0, 0, 0, 0x80}
	require.Equal(t, want, Bytes(f))
	require.Equal(t, want, bytesPortable(f))
	got := make([]byte, 12)
	require.Equal(t, 12, EncodeLE(got, f))
	require.Equal(t, want, got)
	back := make([]float32, 3)
	require.Equal(t, 3, DecodeLE(back, want))
	requireSame(t, f, back)
}

func TestViewsAlias(t *testing.T) {
	if !ZeroCopy {
		t.Skip("portable build: views are copies")
	}
	f := Alloc(4)
	b := Bytes(f)
	b[3] = 0x3f
	b[2] = 0x80
	require.Equal(t, float32(1), f[0])
	g := Float32s(b)
	g[1] = 2
	require.Equal(t, float32(2), f[1])
}

func TestFloat32sChecks(t *testing.T) {
	require.Panics(t, func() { Float32s(make([]byte, 5)) })
	require.Panics(t, func() { DecodeLE(make([]float32, 1), make([]byte, 3)) })
	require.Panics(t, func() { DecodeLE(make([]float32, 1), make([]byte, 8)) })
	require.Panics(t, func() { EncodeLE(make([]byte, 7), make([]float32, 2)) })
	if ZeroCopy {
		b := Bytes(Alloc(4))
		require.Panics(t, func() { Float32s(b[1:5]) })
		require.NotPanics(t, func() { Float32s(b[4:12]) })
	}
	require.Equal(t, []float32{}, Float32s([]byte{}))
}

func TestAllocAligned(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 7, 100, 1 << 16} {
		f := Alloc(n)
		require.Len(t, f, n)
		for _, v := range f {
			require.Zero(t, v)
		}
		if n > 0 && ZeroCopy {
			require.Zero(t, uintptr(unsafe.Pointer(&f[0]))%8, "n=%d", n)
		}
	}
	require.Panics(t, func() { Alloc(-1) })
}

func FuzzViews(f *testing.F) {
	f.Add([]byte{0, 0, 0x80, 0x3f})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		raw = raw[:len(raw)/4*4]
		b := Bytes(Alloc(len(raw) / 4)) // aligned home for the bytes
		copy(b, raw)
		fs := Float32s(b)
		requireSame(t, float32sPortable(raw), fs)
		require.Equal(t, raw, bytesPortable(fs))
		require.Equal(t, raw, Bytes(fs))
	})
}

var sink float32

func BenchmarkAdd(b *testing.B) {
	for _, n := range []int{4096, 1 << 20, 16 << 20} {
		dst, src := make([]float32, n), make([]float32, n)
		b.Run(fmt.Sprintf("blas32/%d", n), func(b *testing.B) {
			b.SetBytes(int64(12 * n))
			for b.Loop() {
				Add(dst, src)
			}
		})
		b.Run(fmt.Sprintf("loop/%d", n), func(b *testing.B) {
			b.SetBytes(int64(12 * n))
			for b.Loop() {
				for i := range dst {
					dst[i] += src[i]
				}
			}
		})
		sink += dst[0]
	}
}
