package codec

import (
	"bytes"
	"io"
	"math"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"trainwire.dev/lib/rng"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// genTensor draws a tensor shape and data: lengths around the kernels'
// unrolling and block boundaries, data of mixed scales with exact zeros,
// ties, subnormals and sign changes (all finite, and within fp16's range
// so that sums stay finite).
func genTensor(t *rapid.T) ([]int64, []float32) {
	d := rapid.OneOf(
		rapid.SampledFrom([]int{1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 4095, 4096, 4097}),
		rapid.IntRange(1, 3000),
	).Draw(t, "d")
	shape := []int64{int64(d)}
	if c := rapid.IntRange(1, 8).Draw(t, "cols"); d%c == 0 {
		shape = []int64{int64(d / c), int64(c)}
	}
	scale := math.Pow(10, float64(rapid.IntRange(-40, 3).Draw(t, "scale")))
	seed := rapid.Uint64().Draw(t, "seed")
	x := gauss(d, seed)
	kind := rapid.IntRange(0, 3).Draw(t, "kind")
	for i := range x {
		v := float64(x[i]) * scale
		switch {
		case kind == 1 && i%3 == 0:
			v = 0
		case kind == 2:
			v = math.Round(v / scale * 2) // ties: few distinct magnitudes
		case kind == 3 && i%5 == 0:
			v = -v
		}
		x[i] = float32(v)
	}
	return shape, x
}

// genOptions draws the codec options the properties must hold for.
func genOptions(t *rapid.T) Options {
	return Options{
		Ratio:       rapid.SampledFrom([]float64{0.001, 0.01, 0.05, 0.3, 1}).Draw(t, "ratio"),
		Seed:        rapid.Uint64().Draw(t, "codec seed"),
		Levels:      rapid.Int64Range(1, 300).Draw(t, "levels"),
		Rank:        rapid.Int64Range(1, 4).Draw(t, "rank"),
		Samplings:   rapid.Int64Range(1, 40).Draw(t, "samplings"),
		Threshold:   rapid.SampledFrom([]float64{0.001, 0.01, 0.5}).Draw(t, "threshold"),
		RowSelector: rapid.SampledFrom([]string{SelectorL2, SelectorMSTopK}).Draw(t, "row selector"),
	}
}

// TestPropertyCodecs checks, for any codec on any drawn tensor and
// options: the frame does not depend on the goroutine count; its payload
// has the size the codec states (threshold's: 8 bytes per element it
// keeps); it survives the wire (written, read back, decoded to the same
// bits); and with residual error feedback the residual is exactly the
// input minus what was sent.
func TestPropertyCodecs(t *testing.T) {
	mem, err := NewMemory("residual", MemoryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(t *rapid.T) {
		algo := rapid.SampledFrom(Algos()).Draw(t, "algo")
		shape, x := genTensor(t)
		o := genOptions(t)
		in := Input{Name: "w", Step: rapid.Int64Range(0, 1000).Draw(t, "step"), Shape: shape, Data: x}

		o.Workers = 1
		c1, err := New(algo, o)
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		f1, err := c1.Encode(in)
		if err != nil {
			t.Fatalf("encode: %v", err)
		}
		o.Workers = rapid.IntRange(2, 8).Draw(t, "workers")
		cw, _ := New(algo, o)
		fw, err := cw.Encode(in)
		if err != nil {
			t.Fatalf("encode with %d workers: %v", o.Workers, err)
		}
		if !reflect.DeepEqual(f1, fw) {
			t.Fatalf("the frame differs between 1 and %d workers", o.Workers)
		}

		want := c1.Size(shape)
		if algo == "threshold" {
			want = 0
			for _, v := range x {
				if math.Abs(float64(v)) >= o.Threshold {
					want += 8
				}
			}
		}
		if got := payload(f1); got != want {
			t.Fatalf("payload %d bytes, Size %d", got, want)
		}

		y, err := Decode(f1, nil)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		if len(y) != len(x) {
			t.Fatalf("decoded %d elements of %d", len(y), len(x))
		}
		// Decode sets every element of dst: into a buffer of garbage (as
		// a recycled one, tensor.Pool) it gives the same bits.
		dirty := make([]float32, len(x))
		for i := range dirty {
			dirty[i] = float32(math.NaN())
		}
		if _, err := Decode(f1, dirty); err != nil {
			t.Fatalf("decode into a used buffer: %v", err)
		}
		if !slices.EqualFunc(y, dirty, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Fatal("decoding into a used buffer left some of it")
		}
		var buf bytes.Buffer
		w := wire.NewWriter(&buf, "test")
		if err := w.Write(f1); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rd := wire.NewReader(&buf, wire.Limits{})
		fr, err := rd.Next()
		if err != nil {
			t.Fatalf("reading the frame back: %v", err)
		}
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("after the frame: %v", err)
		}
		y2, err := Decode(fr.(*wire.Compressed), nil)
		if err != nil {
			t.Fatalf("decode after the wire: %v", err)
		}
		if !slices.EqualFunc(y, y2, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
			t.Fatal("the frame decodes differently after the wire")
		}

		enc := &Encoder{Codec: c1, Memory: mem, Store: NewStore()}
		_, sent, err := enc.Encode(in)
		if err != nil {
			t.Fatalf("encode with error feedback: %v", err)
		}
		e := enc.Store.Get("w").Slots["e"]
		for i := range x {
			if math.Float32bits(e[i]) != math.Float32bits(x[i]-sent[i]) {
				t.Fatalf("residual[%d] = %v, want input − sent = %v − %v", i, e[i], x[i], sent[i])
			}
		}
	})
}

// TestPropertySum: for the codecs whose frames add without decoding,
// Sum of three ranks' frames decodes to the element-wise sum of their
// decodings, added in rank order: bit for bit (±0 alike) for values in
// float32, within one rounding for fp16 and bf16, which round the sum.
func TestPropertySum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		algo := rapid.SampledFrom([]string{"randomk", "topk", "mstopk", "dgc", "threshold", "fp16", "bf16", "hitopk"}).Draw(t, "algo")
		shape, _ := genTensor(t)
		o := genOptions(t)
		c, err := New(algo, o)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := numel(shape)
		d := int(n)
		var fs []*wire.Compressed
		want := make([]float32, d)
		for range 3 {
			x := gauss(d, rapid.Uint64().Draw(t, "rank seed"))
			f, err := c.Encode(Input{Name: "w", Step: 5, Shape: shape, Data: x})
			if err != nil {
				t.Fatal(err)
			}
			y, err := Decode(f, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range y {
				want[i] += v
			}
			fs = append(fs, f)
		}
		out, err := Sum(fs)
		if err != nil {
			t.Fatalf("sum: %v", err)
		}
		got := make([]float32, d)
		switch o := out.(type) {
		case *wire.Compressed:
			if got, err = Decode(o, nil); err != nil {
				t.Fatal(err)
			}
		case *wire.Sparse:
			w := int(o.Width)
			for j, i := range tensor.Uint32sOrCopy(o.Indices) {
				copy(got[int(i)*w:(int(i)+1)*w], f32s(o.Values)[j*w:])
			}
		}
		for i := range want {
			if algo == "fp16" || algo == "bf16" {
				if math.Abs(float64(got[i]-want[i])) > math.Abs(float64(want[i]))*0x1p-7 {
					t.Fatalf("element %d: sum %v, decodings add to %v", i, got[i], want[i])
				}
				continue
			}
			if got[i] != want[i] { // == treats −0 and +0 alike
				t.Fatalf("element %d: sum %v, decodings add to %v", i, got[i], want[i])
			}
		}
	})
}

// TestPropertyMSTopK: MSTopK (three probes counted per pass, parallel
// selection) picks exactly the indices of its plain serial reference,
// for any data, k, N and goroutine count.
func TestPropertyMSTopK(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, x := genTensor(t)
		k := rapid.IntRange(0, len(x)+1).Draw(t, "k")
		n := rapid.IntRange(1, 40).Draw(t, "N")
		w := rapid.IntRange(1, 5).Draw(t, "workers")
		key := rapid.Uint64().Draw(t, "key")
		got, _ := MSTopK(x, k, n, key, w)
		if ref := mstopkRef(x, k, n, key); !slices.Equal(got, ref) {
			t.Fatalf("k=%d N=%d: %d indices differ from the reference's %d", k, n, len(got), len(ref))
		}
	})
}

// TestPropertyTopK: TopK (radix selection, mask-driven collection)
// returns exactly its plain reference's indices (ties to the lowest
// index), for any data, k and goroutine count.
func TestPropertyTopK(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		_, x := genTensor(t)
		k := rapid.IntRange(0, len(x)+1).Draw(t, "k")
		w := rapid.IntRange(1, 5).Draw(t, "workers")
		if got, ref := TopK(x, k, w), topkRef(x, min(k, len(x))); !slices.Equal(got, ref) {
			t.Fatalf("k=%d: %d indices differ from the reference's %d", k, len(got), len(ref))
		}
	})
}

// dgcSelectRef is DGCSelect as first written: one counting pass per
// round, a serial collection.
func dgcSelectRef(x []float32, k int, key uint64) ([]uint32, float32) {
	d := len(x)
	if d < 16384 || k >= d {
		return topkRef(x, min(k, d)), 0
	}
	stride := 1000
	if d <= 1<<20 {
		stride = 100
	}
	s := rng.Seq{Key: key}
	start := int(s.Below(uint64(stride)))
	var sample []float32
	for i := start; i < d; i += stride {
		sample = append(sample, x[i])
	}
	ks := int(math.Ceil(1.1 * float64(k) * float64(len(sample)) / float64(d)))
	ks = max(1, min(ks, len(sample)))
	thr := float32(math.Inf(1))
	for _, i := range topkRef(sample, ks) {
		thr = min(thr, float32(math.Abs(float64(sample[i]))))
	}
	for round := 0; round <= 10; round++ {
		tk := math.Float32bits(thr)
		var cand []uint32
		var vals []float32
		for i, v := range x {
			if magKey(v) >= tk {
				cand = append(cand, uint32(i))
				vals = append(vals, v)
			}
		}
		if len(cand) >= k && thr > 0 {
			out := make([]uint32, k)
			for j, p := range topkRef(vals, k) {
				out[j] = cand[p]
			}
			return out, thr
		}
		if round < 10 {
			thr *= 0.8
		}
	}
	return topkRef(x, k), 0
}

// TestPropertyDGC: DGCSelect (three rounds counted per pass, parallel
// mask-driven collection) picks the same indices and threshold as the
// serial original, on tensors past its 16384-element sampling bound,
// including data where the sampled threshold needs several rounds.
func TestPropertyDGC(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		d := rapid.IntRange(16384, 40000).Draw(t, "d")
		x := gauss(d, rapid.Uint64().Draw(t, "seed"))
		k := rapid.IntRange(1, d/10).Draw(t, "k")
		if rapid.Bool().Draw(t, "spiky") {
			// Spikes the sample may over- or under-represent: the
			// threshold it gives can keep fewer than k, and the ×0.8
			// rounds follow (about one draw in six needed more than one).
			v := float32(rapid.Float64Range(2, 8).Draw(t, "spike"))
			every := rapid.IntRange(20, 2000).Draw(t, "every")
			for i := rapid.IntRange(0, 99).Draw(t, "phase"); i < d; i += every {
				x[i] = v
			}
		}
		key := rapid.Uint64().Draw(t, "key")
		w := rapid.IntRange(1, 5).Draw(t, "workers")
		got, gthr := DGCSelect(x, k, key, w)
		ref, rthr := dgcSelectRef(x, k, key)
		if !slices.Equal(got, ref) || math.Float32bits(gthr) != math.Float32bits(rthr) {
			t.Fatalf("k=%d: threshold %v vs %v; %d vs %d indices", k, gthr, rthr, len(got), len(ref))
		}
	})
}
