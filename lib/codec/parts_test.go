package codec

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

// encodeParts compresses x as P chunks with c and returns the frames.
func encodeParts(t *testing.T, c Codec, name string, shape []int64, x []float32, P int) []*wire.Compressed {
	t.Helper()
	ins, err := Split(Input{Name: name, Step: 2, Rank: 1, Shape: shape, Data: x}, P)
	require.NoError(t, err)
	require.Len(t, ins, P)
	var fs []*wire.Compressed
	for k, in := range ins {
		f, err := c.Encode(in)
		require.NoError(t, err)
		MarkPart(f, k, P, shape)
		fs = append(fs, f)
	}
	return fs
}

// joinParts decodes every chunk and puts the tensor back together.
func joinParts(t *testing.T, fs []*wire.Compressed) ([]float32, PartInfo) {
	t.Helper()
	var dst []float32
	var info PartInfo
	for k, f := range fs {
		pi, ok, err := PartOf(f)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, k, pi.Part)
		if dst == nil {
			dst, info = make([]float32, pi.Numel), pi
		}
		y, err := Decode(f, nil)
		require.NoError(t, err)
		require.NoError(t, Join(dst, pi, y))
	}
	return dst, info
}

// §7a item 12: P chunks of ⌈d/P⌉ (the last shorter, padded), each with a
// payload of the same size — a function of m and the parameters only —
// for every codec, also with d < P and an empty tensor.
func TestPartsEqualPayloads(t *testing.T) {
	for _, algo := range Algos() {
		if algo == "threshold" { // its size depends on the data by design
			continue
		}
		c := mustNew(t, algo, Options{Ratio: 0.1, Seed: 7, Levels: 5, Rank: 2, Samplings: 10})
		for _, d := range []int{0, 1, 5, 1000, 4097} {
			for _, P := range []int{1, 2, 3, 8, 13} {
				x := gauss(d, uint64(d+P))
				fs := encodeParts(t, c, "w", []int64{int64(d)}, x, P)
				m := PartLen(int64(d), P)
				for k, f := range fs {
					assert.Equal(t, []int64{m}, f.Shape, "%s d=%d P=%d part %d", algo, d, P, k)
					assert.Equal(t, c.Size([]int64{m}), payload(f), "%s d=%d P=%d part %d", algo, d, P, k)
					assert.Equal(t, PartName("w", k, P), f.Name)
				}
				got, info := joinParts(t, fs)
				assert.Equal(t, int64(d), info.Numel)
				assert.Equal(t, "w", info.Base)
				assert.Len(t, got, d)
			}
		}
	}
}

// Per-element codecs: the joined chunks decode to exactly what the whole
// tensor decodes to.
func TestPartsPerElementEqualWhole(t *testing.T) {
	x := gauss(10_001, 4)
	x[17], x[9000] = 70000, -1e-9 // fp16 overflow and underflow
	for _, algo := range []string{"fp16", "bf16"} {
		c := mustNew(t, algo, Options{})
		whole, err := c.Encode(Input{Name: "w", Shape: []int64{73, 137}, Data: x})
		require.NoError(t, err)
		want, err := Decode(whole, nil)
		require.NoError(t, err)
		for _, P := range []int{1, 4, 7, 10_001, 20_000} {
			got, info := joinParts(t, encodeParts(t, c, "w", []int64{73, 137}, x, P))
			assert.Equal(t, []int64{73, 137}, info.Shape)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
					t.Fatalf("%s P=%d element %d: %v, whole tensor %v", algo, P, i, got[i], want[i])
				}
			}
		}
	}
}

// Top-k per chunk is not the global top-k: each chunk keeps exactly its
// own k = ⌈ratio·m⌉ largest, with chunk-local indices.
func TestPartsTopKPerChunk(t *testing.T) {
	const d, P = 1000, 4
	x := gauss(d, 5)
	// Chunk 0 holds all the large values: a global top-k would take them all.
	for i := range 250 {
		x[i] *= 100
	}
	c := mustNew(t, "topk", Options{Ratio: 0.02})
	fs := encodeParts(t, c, "w", []int64{d}, x, P)
	got, _ := joinParts(t, fs)
	m := int(PartLen(d, P))
	k := int(KFor(int64(m), 0.02, 0))
	for ch := range P {
		part := x[ch*m : (ch+1)*m]
		require.NoError(t, checkSparse(fs[ch], int64(k)), "chunk %d", ch)
		raw := fs[ch].Parts[1].Data
		idx := make([]uint32, len(raw)/4)
		for j := range idx {
			idx[j] = uint32(raw[4*j]) | uint32(raw[4*j+1])<<8 | uint32(raw[4*j+2])<<16 | uint32(raw[4*j+3])<<24
		}
		require.Len(t, idx, k, "chunk %d", ch)
		for _, i := range idx {
			require.Less(t, int(i), m, "chunk %d: index %d is not chunk-local", ch, i)
		}
		mags := make([]float64, m)
		for i, v := range part {
			mags[i] = math.Abs(float64(v))
		}
		order := make([]int, m)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			if mags[a] != mags[b] {
				if mags[a] > mags[b] {
					return -1
				}
				return 1
			}
			return a - b
		})
		for _, i := range order[:k] {
			assert.Equal(t, part[i], got[ch*m+i], "chunk %d element %d kept", ch, i)
		}
		kept := 0
		for i := range m {
			if got[ch*m+i] != 0 {
				kept++
			}
		}
		assert.Equal(t, k, kept, "chunk %d", ch)
	}
}

// A frame whose marks are partial or disagree with its name or shape is
// refused, naming the problem.
func TestPartOfRefuses(t *testing.T) {
	c := mustNew(t, "fp16", Options{})
	good := func() *wire.Compressed {
		return encodeParts(t, c, "w", []int64{10}, gauss(10, 1), 3)[1]
	}
	_, ok, err := PartOf(&wire.Compressed{Name: "w", Params: map[string]any{}})
	require.NoError(t, err)
	require.False(t, ok)
	for name, mut := range map[string]func(f *wire.Compressed){
		"no parts":      func(f *wire.Compressed) { delete(f.Params, ParamParts) },
		"part past P":   func(f *wire.Compressed) { f.Params[ParamPart] = int64(3) },
		"zero parts":    func(f *wire.Compressed) { f.Params[ParamParts] = int64(0) },
		"wrong name":    func(f *wire.Compressed) { f.Name = "w[2/3]" },
		"wrong chunk":   func(f *wire.Compressed) { f.Shape = []int64{3} },
		"shape string":  func(f *wire.Compressed) { f.Params[ParamTensorShape] = "10" },
		"negative dim":  func(f *wire.Compressed) { f.Params[ParamTensorShape] = []any{int64(-10)} },
		"no dimensions": func(f *wire.Compressed) { f.Params[ParamTensorShape] = []any{} },
	} {
		f := good()
		mut(f)
		_, ok, err := PartOf(f)
		assert.True(t, ok, name)
		assert.Error(t, err, name)
	}
	_, err = Split(Input{Name: "w", Data: make([]float32, 4)}, 0)
	assert.Error(t, err)
	assert.Error(t, Join(make([]float32, 10), PartInfo{Base: "w", Part: 0, Parts: 3, Numel: 10}, make([]float32, 3)))
}

// Through the wire: a chunk's marks survive encoding and decoding of the
// frame (msgpack gives the shape back as an array of integers).
func TestPartsWireRoundTrip(t *testing.T) {
	c := mustNew(t, "qsgd", Options{Seed: 3})
	fs := encodeParts(t, c, "layer.weight", []int64{6, 7}, gauss(42, 2), 5)
	var buf bytes.Buffer
	w := wire.NewWriter(&buf, "test")
	for _, f := range fs {
		require.NoError(t, w.Write(f))
	}
	require.NoError(t, w.Close())
	r := wire.NewReader(&buf, wire.DefaultLimits)
	for k := range fs {
		g, err := r.Next()
		require.NoError(t, err, fmt.Sprint(k))
		pi, ok, err := PartOf(g.(*wire.Compressed))
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, PartInfo{Base: "layer.weight", Part: k, Parts: 5, Shape: []int64{6, 7}, Numel: 42}, pi)
	}
}
