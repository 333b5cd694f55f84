package tensor

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// leU32s is the reference decoding the uint32 helpers are checked against.
func leU32s(b []byte) []uint32 {
	u := make([]uint32, len(b)/4)
	for i := range u {
		u[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return u
}

// TestUint32ViewsMatchPortable: Uint32s/Uint32Bytes against encoding/binary
// and their portable twins, at every length the float tests use.
func TestUint32ViewsMatchPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range lengths {
		u := make([]uint32, n)
		for i := range u {
			u[i] = rng.Uint32()
		}
		b := Uint32Bytes(u)
		want := make([]byte, 0, 4*n)
		for _, x := range u {
			want = binary.LittleEndian.AppendUint32(want, x)
		}
		require.Equal(t, want, b, "n=%d", n)
		require.Equal(t, u, Uint32s(b), "n=%d", n)
		require.Equal(t, u, uint32sPortable(b), "n=%d", n)
	}
	require.Nil(t, Uint32Bytes(nil))
	require.Nil(t, Uint32s(nil))
	require.Equal(t, []uint32{}, Uint32s([]byte{}))
	require.Panics(t, func() { Uint32s(make([]byte, 6)) })
	require.Panics(t, func() { uint32sPortable(make([]byte, 6)) })
}

// TestViewOrCopyAtEveryOffset: the view-or-copy helpers give the same
// values at every byte offset into an aligned buffer (views at multiples
// of 4, copies elsewhere on zero-copy builds) and never panic on
// alignment.
func TestViewOrCopyAtEveryOffset(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	home := Bytes(Alloc(64))
	for i := range home {
		home[i] = byte(rng.Uint32())
	}
	for off := range 4 {
		b := home[off : off+4*13]
		require.Equal(t, !ZeroCopy || off == 0, Aligned(b), "offset %d", off)
		requireSame(t, float32sPortable(b), Float32sOrCopy(b))
		require.Equal(t, leU32s(b), Uint32sOrCopy(b), "offset %d", off)
	}
}

// TestWritableFlush: what is written through the writable views reaches
// the buffer after flush, aligned or not; with a view, before flush too.
func TestWritableFlush(t *testing.T) {
	home := Bytes(Alloc(32))
	for off := range 4 {
		clear(home)
		b := home[off : off+16]
		f, flush := WritableFloat32s(b)
		require.Len(t, f, 4)
		f[0], f[3] = 1.5, -2
		flush()
		requireSame(t, []float32{1.5, 0, 0, -2}, float32sPortable(b))

		clear(home)
		u, flush := WritableUint32s(b)
		require.Len(t, u, 4)
		u[1], u[2] = 7, 1<<31
		flush()
		require.Equal(t, []uint32{0, 7, 1 << 31, 0}, leU32s(b), "offset %d", off)
	}
}

// TestAppendHelpers: AppendFloat32s/AppendUint32s extend dst with the
// little-endian encoding and keep what dst held.
func TestAppendHelpers(t *testing.T) {
	f := []float32{1, -2}
	got := AppendFloat32s([]byte{9}, f)
	require.Equal(t, append([]byte{9}, bytesPortable(f)...), got)
	got = AppendUint32s([]byte{8}, []uint32{0x01020304})
	require.Equal(t, []byte{8, 4, 3, 2, 1}, got)
	require.Equal(t, []byte{5}, AppendUint32s([]byte{5}, nil))
	require.Equal(t, []byte{5}, AppendFloat32s([]byte{5}, nil))
}
