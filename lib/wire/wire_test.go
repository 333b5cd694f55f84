package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/zeebo/xxh3"
)

func f32le(vals ...float32) []byte {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

// sampleFrames has one frame of every data type, with awkward values.
func sampleFrames() []Frame {
	sub := math.Float32frombits(1)
	idx := make([]byte, 8)
	binary.LittleEndian.PutUint32(idx, 1)
	binary.LittleEndian.PutUint32(idx[4:], 3)
	chunk := []byte("checkpoint bytes")
	return []Frame{
		&Dense{Name: "layer0.weight", Step: 7, Rank: 2, DType: F32, Shape: []int64{2, 3},
			Data: f32le(1.5, float32(math.NaN()), float32(math.Copysign(0, -1)), float32(math.Inf(-1)), sub, -2)},
		&Dense{Name: "empty", Rank: -1, DType: F32, Shape: []int64{0}, Data: []byte{}},
		&Dense{Name: "scalar", Rank: -1, DType: F64, Shape: []int64{}, Data: make([]byte, 8)},
		&Sparse{Name: "emb", Rank: 0, DType: F32, Shape: []int64{4, 2}, Width: 2, Format: COO, IType: U32,
			Nnz: 2, Indices: idx, Values: f32le(1, 2, 3, 4)},
		&Sparse{Name: "emb.bm", Rank: 0, DType: F32, Shape: []int64{10}, Width: 1, Format: Bitmap,
			Nnz: 3, Indices: []byte{0b10000011, 0}, Values: f32le(1, 2, 3)},
		&Compressed{Name: "g", Rank: 1, Algo: "topk", DType: F32, Shape: []int64{100},
			Params: map[string]any{"k": int64(2), "ratio": 0.02, "seed": "abc", "exact": true},
			Parts: []Part{{Name: "indices", DType: U32, Shape: []int64{2}, Data: make([]byte, 8)},
				{Name: "values", DType: F32, Shape: []int64{2}, Data: f32le(9, -9)}}},
		&Event{Name: "ncclKernel_AllReduce", Cat: "comm", Ph: "X", Rank: 3, PID: 1, TID: 7, Stream: 7,
			TS: 1_700_000_000_000_000_000, Dur: 12345, Corr: 99,
			Args: map[string]any{"bytes": int64(1 << 20), "nested": []any{int64(-1), "x", nil, 2.5, map[string]any{"b": []byte{1, 2}}}}},
		&Model{Name: "bert", World: 4, Iters: 10, IterNS: 100e6, ForwardNS: 30e6, BackwardNS: 60e6,
			Grads: []Grad{{Name: "a", Bytes: 4096, Numel: 1024, DType: F32, ReadyNS: 10, ComputeNS: 5}},
			Comm:  []CommSample{{Op: "allreduce", Bytes: 4096, NS: 1000, World: 4}},
			Meta:  map[string]any{"source": "trace.json"}},
		&Plan{Kind: "fusion", Algo: "pareto", Groups: [][2]int64{{0, 3}, {4, 9}},
			Items: []map[string]any{{"option": "gpu"}, {}}, PredictedNS: 123, ProvenOptimal: true,
			Meta: map[string]any{"nodes": int64(42)}},
		&Chunk{Job: "j", Iter: 5, SrcRank: 1, ReplicaOf: 0, Offset: 16, Len: int64(len(chunk)), TotalLen: 64,
			CRC32C: CRC32C(chunk), Data: chunk},
		&Stats{Tool: "hashsync", Name: "allreduce", Rank: 0, Values: map[string]float64{"busbw": 1.5, "n": 3},
			Labels: map[string]string{"scheme": "zen"}},
		&Error{Code: "peer_failed", Msg: "rank 2 died", Rank: 2, Frame: -1},
	}
}

func encodeStream(t testing.TB, frames ...Frame) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, "test/1")
	for _, f := range frames {
		require.NoError(t, w.Write(f))
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func readAll(r *Reader) ([]Frame, error) {
	var out []Frame
	for {
		f, err := r.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, f)
	}
}

func TestRoundTripEveryType(t *testing.T) {
	in := sampleFrames()
	b := encodeStream(t, in...)
	r := NewReader(bytes.NewReader(b), Limits{})
	out, err := readAll(r)
	require.NoError(t, err)
	require.Len(t, out, len(in))
	for i := range in {
		// Re-encode both and compare bytes: NaN-safe and canonical.
		assert.Equal(t, encodeStream(t, in[i]), encodeStream(t, out[i]), "frame %d (%s)", i, in[i].Type())
	}
	assert.Equal(t, "test/1", r.Header().Producer)
	assert.Equal(t, int64(len(b)), r.Offset())
	// Bit-exact float payload, including NaN, -0 and the subnormal.
	assert.Equal(t, in[0].(*Dense).Data, out[0].(*Dense).Data)
}

func TestEmptyStream(t *testing.T) {
	b := encodeStream(t)
	out, err := readAll(NewReader(bytes.NewReader(b), Limits{}))
	require.NoError(t, err)
	assert.Empty(t, out)
}

func TestConcatenatedStreams(t *testing.T) {
	a := encodeStream(t, sampleFrames()[:2]...)
	b := encodeStream(t, sampleFrames()[2:5]...)
	out, err := readAll(NewReader(bytes.NewReader(append(a, b...)), Limits{}))
	require.NoError(t, err)
	assert.Len(t, out, 5)
}

func TestCanonicalBytes(t *testing.T) {
	// A tiny dense frame, byte for byte: map of 8, t, v, name, step, rank,
	// dtype, shape, data (docs/wire.md order, smallest encodings).
	var buf bytes.Buffer
	w := NewWriter(&buf, "p")
	require.NoError(t, w.Write(&Dense{Name: "x", Rank: -1, DType: F32, Shape: []int64{1}, Data: f32le(1)}))
	require.NoError(t, w.Flush())
	want := []byte{0x88, 0xa1, 't', 0xa5, 'd', 'e', 'n', 's', 'e', 0xa1, 'v', 0x01,
		0xa4, 'n', 'a', 'm', 'e', 0xa1, 'x', 0xa4, 's', 't', 'e', 'p', 0x00,
		0xa4, 'r', 'a', 'n', 'k', 0xff, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa3, 'f', '3', '2',
		0xa5, 's', 'h', 'a', 'p', 'e', 0x91, 0x01, 0xa4, 'd', 'a', 't', 'a', 0xc4, 0x04, 0, 0, 0x80, 0x3f}
	assert.True(t, bytes.HasSuffix(buf.Bytes(), want), "got % x", buf.Bytes())
}

func TestTruncatedAtEveryByte(t *testing.T) {
	b := encodeStream(t, sampleFrames()...)
	for n := 0; n < len(b); n++ {
		_, err := readAll(NewReader(bytes.NewReader(b[:n]), Limits{}))
		require.Error(t, err, "prefix of %d bytes", n)
		require.ErrorIs(t, err, ErrTruncated, "prefix of %d bytes: %v", n, err)
	}
}

func TestCorruptedByteNeverPanics(t *testing.T) {
	b := encodeStream(t, sampleFrames()...)
	for i := range b {
		for _, x := range []byte{0xff, 0x01, 0x80} {
			c := bytes.Clone(b)
			c[i] ^= x
			_, _ = readAll(NewReader(bytes.NewReader(c), Limits{MaxPayload: 1 << 16}))
		}
	}
}

func TestPayloadFlipDetectedByDigest(t *testing.T) {
	b := encodeStream(t, &Dense{Name: "x", Rank: -1, DType: U8, Shape: []int64{4}, Data: []byte{1, 2, 3, 4}})
	i := bytes.Index(b, []byte{1, 2, 3, 4})
	b[i+2] = 9
	_, err := readAll(NewReader(bytes.NewReader(b), Limits{}))
	require.ErrorIs(t, err, ErrDigest)
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, int64(2), de.Frame)
	assert.Contains(t, err.Error(), "xxh3")
}

// rawStream hand-builds a stream: header, one raw frame (with no bin
// values), and an end frame claiming endCount frames.
func rawStream(t *testing.T, raw []byte, endCount int64) []byte {
	var buf bytes.Buffer
	w := NewWriter(&buf, "t")
	require.NoError(t, w.start())
	require.NoError(t, w.Flush())
	buf.Write(raw)
	e := encoder{enc: w.enc, bw: w.bw}
	require.NoError(t, e.frame(&End{Count: endCount, XXH3: xxh3.Hash(nil)}))
	require.NoError(t, w.bw.Flush())
	return buf.Bytes()
}

func TestMalformed(t *testing.T) {
	head := []byte{0xa1, 't', 0xa5, 'd', 'e', 'n', 's', 'e', 0xa1, 'v', 0x01}
	dense := func(data ...byte) []byte {
		b := append([]byte{0x85}, head...)
		b = append(b, 0xa5, 'd', 't', 'y', 'p', 'e', 0xa2, 'u', '8', 0xa5, 's', 'h', 'a', 'p', 'e', 0x91, 0x04,
			0xa4, 'd', 'a', 't', 'a')
		return append(b, data...)
	}
	cases := []struct {
		name, raw, want string
	}{
		{"str payload", string(dense(0xa4, 1, 2, 3, 4)), `field "data": is str, want bin`},
		{"nil payload", string(dense(0xc0)), `field "data": is nil, want bin`},
		{"array payload", string(dense(0x94, 1, 2, 3, 4)), `field "data": is array, want bin`},
		{"short payload", string(dense(0xc4, 3, 1, 2, 3)), `field "data": 3 bytes, want 4`},
		{"huge declared bin32", string(dense(0xc6, 0xff, 0xff, 0xff, 0xf0, 1, 2)), "exceeds the limit"},
		{"unknown type", "\x82\xa1t\xa3foo\xa1v\x01", `unknown frame type "foo"`},
		{"t not first", "\x82\xa1v\x01\xa1t\xa5dense", `first key must be "t"`},
		{"future version", "\x82\xa1t\xa5dense\xa1v\x02", "version 2"},
		{"not a map", "\x93\x01\x02\x03", "is array, want map"},
		{"missing data", "\x84\xa1t\xa5dense\xa1v\x01\xa5dtype\xa2u8\xa5shape\x91\x00", `field "data": missing`},
		{"huge array", "\x83\xa1t\xa5dense\xa1v\x01\xa5shape\xdd\x7f\xff\xff\xff", "exceeds the limit"},
		{"deep nesting", "\x83\xa1t\xa5event\xa1v\x01\xa4args\x81\xa1a" + strings.Repeat("\x91", 40) + "\x00", "nested deeper"},
		{"duplicate key", "\x84\xa1t\xa5event\xa1v\x01\xa3dur\x01\xa3dur\x01", "twice"},
		{"ext value", "\x83\xa1t\xa5event\xa1v\x01\xa4args\x81\xa1a\xd4\x01\x00", "ext"},
		{"bad dtype", "\x85\xa1t\xa5dense\xa1v\x01\xa5dtype\xa3f99\xa5shape\x90\xa4data\xc4\x00", `unknown dtype "f99"`},
		{"negative dim", "\x85\xa1t\xa5dense\xa1v\x01\xa5dtype\xa2u8\xa5shape\x91\xff\xa4data\xc4\x00", "negative"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := rawStream(t, []byte(c.raw), 1)
			_, err := readAll(NewReader(bytes.NewReader(b), Limits{MaxPayload: 1 << 20}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, int64(1), de.Frame)
			assert.Greater(t, de.Offset, int64(0))
			assert.Contains(t, err.Error(), "frame 1")
			assert.Equal(t, 2, de.ExitCode())
		})
	}
}

func TestForgedLengthBoundedMemory(t *testing.T) {
	// A bin32 claiming 4 GiB - 1 with a handful of bytes behind it: the
	// reader must fail without allocating anywhere near that.
	raw := []byte("\x85\xa1t\xa5dense\xa1v\x01\xa5dtype\xa2u8\xa5shape\x91\xce\xff\xff\xff\xff\xa4data\xc6\xff\xff\xff\xff")
	raw = append(raw, make([]byte, 1000)...)
	b := rawStream(t, raw, 1)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := readAll(NewReader(bytes.NewReader(b), Limits{}))
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrTruncated)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(2*eagerAlloc+(8<<20)))
}

func TestSequenceErrors(t *testing.T) {
	d := &Dense{Name: "x", Rank: -1, DType: U8, Shape: []int64{1}, Data: []byte{1}}
	full := encodeStream(t, d)
	// Drop the header frame: the first frame is then dense.
	body := full[headerLen(t, "test/1"):]

	_, err := readAll(NewReader(bytes.NewReader(body), Limits{}))
	require.ErrorContains(t, err, "before a stream header")

	_, err = readAll(NewReader(bytes.NewReader(nil), Limits{}))
	require.ErrorIs(t, err, ErrTruncated)
	require.ErrorContains(t, err, "empty input")

	// Header twice.
	twice := append(bytes.Clone(full[:headerLen(t, "test/1")]), full...)
	_, err = readAll(NewReader(bytes.NewReader(twice), Limits{}))
	require.ErrorContains(t, err, "header inside a stream")

	// Count mismatch: end says 1, stream has 0 frames.
	_, err = readAll(NewReader(bytes.NewReader(rawStream(t, nil, 1)), Limits{}))
	require.ErrorIs(t, err, ErrDigest)
	require.ErrorContains(t, err, "end says 1 data frames, 0 were read")
}

func headerLen(t *testing.T, producer string) int {
	var buf bytes.Buffer
	w := NewWriter(&buf, producer)
	require.NoError(t, w.start())
	require.NoError(t, w.Flush())
	return buf.Len()
}

func TestUnknownKeysIgnoredButHashed(t *testing.T) {
	// A dense frame from a future producer with an extra bin key.
	raw := []byte("\x86\xa1t\xa5dense\xa1v\x01\xa5extra\xc4\x02\xaa\xbb\xa5dtype\xa2u8\xa5shape\x91\x01\xa4data\xc4\x01\x07")
	var buf bytes.Buffer
	w := NewWriter(&buf, "t")
	require.NoError(t, w.start())
	require.NoError(t, w.Flush())
	buf.Write(raw)
	w.hash.Write([]byte{0xaa, 0xbb, 0x07})
	e := encoder{enc: w.enc, bw: w.bw}
	require.NoError(t, e.frame(&End{Count: 1, XXH3: w.hash.Sum64()}))
	require.NoError(t, w.bw.Flush())
	out, err := readAll(NewReader(bytes.NewReader(buf.Bytes()), Limits{}))
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, []byte{7}, out[0].(*Dense).Data)
}

func TestWriterRejectsInconsistentFrames(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, "t")
	err := w.Write(&Dense{Name: "x", DType: F32, Shape: []int64{3}, Data: make([]byte, 8)})
	require.ErrorContains(t, err, `field "data": 8 bytes, want 12`)
	err = w.Write(&Chunk{Len: 2, TotalLen: 2, Data: []byte{1, 2}, CRC32C: 5})
	require.ErrorContains(t, err, "CRC32C")
	err = w.Write(&Sparse{DType: F32, Shape: []int64{4}, Width: 1, Format: COO, IType: U32, Nnz: 1,
		Indices: []byte{9, 0, 0, 0}, Values: f32le(1)})
	require.ErrorContains(t, err, "outside [0, 4)")
	err = w.Write(&Dense{DType: Bool, Shape: []int64{2}, Data: []byte{1, 2}})
	require.ErrorContains(t, err, "bool element 1 is 2")
	require.ErrorContains(t, w.Write(&End{}), "writes headers and ends itself")
	// Nothing invalid reached the output.
	assert.Zero(t, buf.Len())
}

func TestErrorNamesOffset(t *testing.T) {
	d := &Dense{Name: "x", Rank: -1, DType: U8, Shape: []int64{1}, Data: []byte{1}}
	b := encodeStream(t, d, d, d)
	// Corrupt the third data frame's type string.
	i := bytes.LastIndex(b, []byte("dense"))
	b[i] = 'X'
	_, err := readAll(NewReader(bytes.NewReader(b), Limits{}))
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, int64(3), de.Frame)
	assert.Equal(t, int64(i-4), de.Offset) // map header, "t" key, str header
	assert.Contains(t, err.Error(), `unknown frame type "Xense"`)
	assert.False(t, errors.Is(err, ErrTruncated))
}

func TestDenseF32(t *testing.T) {
	x := []float32{1, -2.5, float32(math.Inf(1))}
	b := encodeStream(t, NewDenseF32("x", x, 3, 1))
	out, err := readAll(NewReader(bytes.NewReader(b), Limits{}))
	require.NoError(t, err)
	d := out[0].(*Dense)
	assert.Equal(t, []int64{3, 1}, d.Shape)
	got, err := d.F32()
	require.NoError(t, err)
	assert.Equal(t, x, got)
	// A misaligned payload is copied, not mis-read.
	raw := append([]byte{0}, d.Data...)
	d.Data = raw[1:]
	got, err = d.F32()
	require.NoError(t, err)
	assert.Equal(t, x, got)
	_, err = (&Dense{DType: U8}).F32()
	assert.Error(t, err)
}

// A frame with a million unknown keys is decoded in linear time, and a
// repeated key among many is still caught.
func TestManyUnknownKeys(t *testing.T) {
	const n = 200_000
	var raw bytes.Buffer
	raw.Write([]byte{0xdf, 0, 0, 0, 0}) // map32, length patched below
	binary.BigEndian.PutUint32(raw.Bytes()[1:], n+2)
	raw.WriteString("\xa1t\xa5stats\xa1v\x01")
	for i := range n {
		k := fmt.Sprintf("k%06d", i)
		raw.WriteByte(0xa0 | byte(len(k)))
		raw.WriteString(k)
		raw.WriteByte(0x01)
	}
	out, err := readAll(NewReader(bytes.NewReader(rawStream(t, raw.Bytes(), 1)), Limits{}))
	require.NoError(t, err)
	require.Len(t, out, 1)

	dup := bytes.Clone(raw.Bytes())
	i := bytes.LastIndex(dup, []byte("k199999"))
	copy(dup[i:], "k000003")
	_, err = readAll(NewReader(bytes.NewReader(rawStream(t, dup, 1)), Limits{}))
	require.ErrorContains(t, err, `"k000003": key appears twice`)
}

// A payload larger than the eager allocation grows as it arrives and
// still round-trips bit for bit.
func TestLargePayloadGrows(t *testing.T) {
	data := make([]byte, eagerAlloc+eagerAlloc/2+3)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b := encodeStream(t, &Dense{Name: "big", Rank: -1, DType: U8, Shape: []int64{int64(len(data))}, Data: data})
	out, err := readAll(NewReader(bytes.NewReader(b), Limits{}))
	require.NoError(t, err)
	require.True(t, bytes.Equal(data, out[0].(*Dense).Data))
}
