package codec

import (
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// slowResidual is a residual memory the fast path does not recognise:
// Encode runs the generic Compensate, dense decode and Update with it.
type slowResidual struct{ residual }

// TestEncodeInPlaceTwin: in-place error feedback (sparsifiers, halves) gives
// the generic path's frames, sent tensors and state bit for bit, step after
// step, for every scatter codec and fp16/bf16, residual parameters, learning-rate
// rescaling, efsignsgd's memory, awkward lengths and gradients with zeros
// and −0; NoSent only drops the dense tensor.
func TestEncodeInPlaceTwin(t *testing.T) {
	codecs := []struct {
		algo string
		o    Options
	}{
		{"topk", Options{Ratio: 0.05}},
		{"mstopk", Options{Ratio: 0.03}},
		{"threshold", Options{Threshold: 1.2}},
		{"dgc", Options{Ratio: 0.02}},
		{"fp16", Options{}},
		{"bf16", Options{}},
	}
	mems := []struct {
		name string
		o    MemoryOptions
		lrs  []float64 // per step; nil: no rescaling
	}{
		{"residual", MemoryOptions{}, nil},
		{"residual", MemoryOptions{Beta: 0.9, Gamma: 1.5}, nil},
		{"residual", MemoryOptions{}, []float64{0.1, 0.1, 0.05, 0.02, 0.02}},
		{"efsignsgd", MemoryOptions{LR: 0.3}, nil},
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for _, c := range codecs {
		cd, err := New(c.algo, c.o)
		require.NoError(t, err)
		for _, m := range mems {
			for _, n := range []int{1, 7, 1000, 70001} {
				fast, slow := &Encoder{Codec: cd, Store: NewStore()}, &Encoder{Codec: cd, Store: NewStore()}
				quiet := &Encoder{Codec: cd, Store: NewStore(), NoSent: true}
				for step := range 5 {
					mo := m.o
					if m.lrs != nil {
						mo.RescaleLR = m.lrs[step]
					}
					mem, err := NewMemory(m.name, mo)
					require.NoError(t, err)
					fast.Memory, quiet.Memory = mem, mem
					slow.Memory = slowResidual{mem.(residual)}
					in := Input{Name: "w", Step: int64(step), Data: withZeros(rng, n, 0)}
					ff, fs, err := fast.Encode(in)
					require.NoError(t, err)
					sf, ss, err := slow.Encode(in)
					require.NoError(t, err)
					qf, qs, err := quiet.Encode(in)
					require.NoError(t, err)
					what := c.algo + " " + m.name
					require.Equal(t, frameBytes(sf), frameBytes(ff), what)
					require.Equal(t, frameBytes(sf), frameBytes(qf), what)
					require.Equal(t, tensor.Bytes(ss), tensor.Bytes(fs), what)
					require.Nil(t, qs, what)
					for _, enc := range []*Encoder{fast, quiet} {
						got, want := enc.Store.Get("w"), slow.Store.Get("w")
						require.Equal(t, slices.Sorted(maps.Keys(want.Slots)), slices.Sorted(maps.Keys(got.Slots)), what)
						for k, v := range want.Slots {
							require.Equal(t, tensor.Bytes(v), tensor.Bytes(got.Slots[k]), "%s slot %s step %d n %d", what, k, step, n)
						}
					}
				}
			}
		}
	}
}

// TestEncodeInPlaceOverflow: a residual that would overflow float32 once
// the gradient is added leaves the fast path untaken, and the generic path
// rejects the non-finite result with the state as it was.
func TestEncodeInPlaceOverflow(t *testing.T) {
	cd, err := New("topk", Options{Ratio: 0.5})
	require.NoError(t, err)
	mem, err := NewMemory("residual", MemoryOptions{})
	require.NoError(t, err)
	enc := &Encoder{Codec: cd, Memory: mem, Store: NewStore(), NoSent: true}
	st := enc.Store.Get("w")
	e := st.Slot("e", 4)
	copy(e, []float32{math.MaxFloat32, 1, 2, 3})
	before := slices.Clone(e)
	_, _, err = enc.Encode(Input{Name: "w", Data: []float32{math.MaxFloat32, 0, 0, 0}})
	var nf *NonFiniteError
	require.ErrorAs(t, err, &nf)
	require.Equal(t, before, enc.Store.Get("w").Slots["e"])
}

func frameBytes(f *wire.Compressed) [][]byte {
	var out [][]byte
	for _, p := range f.Parts {
		out = append(out, p.Data)
	}
	return out
}

// withZeros draws n normal values times 10^[−decades, decades], an eighth
// of them +0 and an eighth −0.
func withZeros(rng *rand.Rand, n, decades int) []float32 {
	x := make([]float32, n)
	for i := range x {
		switch rng.IntN(8) {
		case 0:
			x[i] = 0
		case 1:
			x[i] = float32(math.Copysign(0, -1))
		default:
			x[i] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(2*decades+1)-decades)))
		}
	}
	return x
}
