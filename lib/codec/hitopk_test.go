package codec

import (
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
	"trainwire.dev/lib/rng"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// hitopkRef is hitopk's selection done plainly: every row's Σx² in
// float64, then a full sort (norm descending, row ascending) for "l2",
// or mstopkRef on the float32 norms for "mstopk".
func hitopkRef(x []float32, rows, w, k int, sel string, n int, key uint64) []uint32 {
	ss := make([]float64, rows)
	for r := range ss {
		for _, v := range x[r*w : (r+1)*w] {
			ss[r] += float64(v) * float64(v)
		}
	}
	if sel == SelectorMSTopK {
		norms := make([]float32, rows)
		for r := range norms {
			norms[r] = float32(math.Sqrt(ss[r]))
		}
		return mstopkRef(norms, k, n, key)
	}
	all := make([]uint32, rows)
	for r := range all {
		all[r] = uint32(r)
	}
	slices.SortFunc(all, func(a, b uint32) int {
		if ss[a] != ss[b] {
			if ss[a] > ss[b] {
				return -1
			}
			return 1
		}
		return int(a) - int(b)
	})
	out := all[:min(k, rows)]
	slices.Sort(out)
	return out
}

// TestHiTopKGolden: rows [3 4] (norm 5), [1 0], [0 −6] (6), [2 2], k = 2:
// rows 0 and 2 travel; a tie goes to the lower row.
func TestHiTopKGolden(t *testing.T) {
	x := []float32{3, 4, 1, 0, 0, -6, 2, 2}
	for _, sel := range []string{SelectorL2, SelectorMSTopK} {
		f := enc(t, "hitopk", Options{K: 2, RowSelector: sel}, x, 4, 2)
		if got := f32s(f.Parts[0].Data); !slices.Equal(got, []float32{3, 4, 0, -6}) {
			t.Fatalf("%s: values %v", sel, got)
		}
		if got := tensor.Uint32sOrCopy(f.Parts[1].Data); !slices.Equal(got, []uint32{0, 2}) {
			t.Fatalf("%s: indices %v", sel, got)
		}
		if !slices.Equal(f.Parts[0].Shape, []int64{2, 2}) || f.Params["selector"] != sel {
			t.Fatalf("%s: values shape %v, params %v", sel, f.Parts[0].Shape, f.Params)
		}
		y, err := Decode(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(y, []float32{3, 4, 0, 0, 0, -6, 0, 0}) {
			t.Fatalf("%s: decoded %v", sel, y)
		}
	}
	tie := enc(t, "hitopk", Options{K: 1}, []float32{0, 5, 3, 4, 5, 0}, 3, 2)
	if got := tensor.Uint32sOrCopy(tie.Parts[1].Data); !slices.Equal(got, []uint32{0}) {
		t.Fatalf("tie: indices %v, want the lowest row", got)
	}
}

// enc encodes x of shape shape with algo, failing the test on an error.
func enc(t *testing.T, algo string, o Options, x []float32, shape ...int64) *wire.Compressed {
	t.Helper()
	f, err := mustNew(t, algo, o).Encode(Input{Name: "w", Step: 3, Shape: shape, Data: x})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPropertyHiTopK: hitopk's frame holds exactly its plain reference's
// rows (both selectors, any data, k, N and goroutine count), bit for bit,
// and decodes to them with every other row zero.
func TestPropertyHiTopK(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		shape, x := genTensor(t)
		o := genOptions(t)
		o.Workers = rapid.IntRange(1, 5).Draw(t, "workers")
		c, err := New("hitopk", o)
		if err != nil {
			t.Fatal(err)
		}
		f, err := c.Encode(Input{Name: "g", Step: 9, Shape: shape, Data: x})
		if err != nil {
			t.Fatal(err)
		}
		rows, w := rowsOf(shape)
		k := KFor(rows, o.Ratio, 0)
		n := o.Samplings
		if n == 0 {
			n = 30
		}
		ref := hitopkRef(x, int(rows), int(w), int(k), o.RowSelector, int(n), rng.Key(o.Seed, 9, "g", rng.PurposeWindow))
		if got := tensor.Uint32sOrCopy(f.Parts[1].Data); !slices.Equal(got, ref) {
			t.Fatalf("%s k=%d of %d rows: rows %v, reference %v", o.RowSelector, k, rows, got, ref)
		}
		y, err := Decode(f, nil)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]float32, len(x))
		vals := f32s(f.Parts[0].Data)
		for j, r := range ref {
			row := x[int64(r)*w : int64(r+1)*w]
			copy(want[int64(r)*w:], row)
			if !slices.Equal(u32view(vals[int64(j)*w:int64(j+1)*w]), u32view(row)) {
				t.Fatalf("row %d: values %v, input %v", r, vals[int64(j)*w:int64(j+1)*w], row)
			}
		}
		if !slices.Equal(u32view(y), u32view(want)) {
			t.Fatal("decoded tensor differs from the selected rows")
		}
	})
}

func u32view(x []float32) []uint32 {
	out := make([]uint32, len(x))
	for i, v := range x {
		out[i] = math.Float32bits(v)
	}
	return out
}

// TestHiTopKVector: on a vector the rows are the elements, so the exact
// selector picks topk's indices and the MSTopK one mstopk's.
func TestHiTopKVector(t *testing.T) {
	x := gauss(10007, 5)
	for _, n := range []int64{2, 3, 5, 12} { // few probes: a wide band, a window that matters
		for _, pair := range [][2]string{{"topk", SelectorL2}, {"mstopk", SelectorMSTopK}} {
			o := Options{Ratio: 0.01, Seed: 11, Samplings: n}
			a := enc(t, pair[0], o, x)
			o.RowSelector = pair[1]
			b := enc(t, "hitopk", o, x)
			if !slices.Equal(a.Parts[1].Data, b.Parts[1].Data) || !slices.Equal(a.Parts[0].Data, b.Parts[0].Data) {
				t.Fatalf("N=%d: hitopk %s differs from %s on a vector", n, pair[1], pair[0])
			}
		}
	}
}

// TestHiTopKMSTopKAccuracy: on continuous data with N = 30, MSTopK's rows
// are the exact ones (seed-topk.md §1.6: overlap 1.000).
func TestHiTopKMSTopKAccuracy(t *testing.T) {
	x := gauss(8192*16, 3)
	for _, ratio := range []float64{0.001, 0.01, 0.1} {
		l2 := enc(t, "hitopk", Options{Ratio: ratio}, x, 8192, 16)
		ms := enc(t, "hitopk", Options{Ratio: ratio, RowSelector: SelectorMSTopK}, x, 8192, 16)
		a, b := tensor.Uint32sOrCopy(l2.Parts[1].Data), tensor.Uint32sOrCopy(ms.Parts[1].Data)
		common := 0
		for _, r := range b {
			if _, ok := slices.BinarySearch(a, r); ok {
				common++
			}
		}
		if len(a) != len(b) || float64(common) < 0.999*float64(len(a)) {
			t.Fatalf("ratio %v: %d of %d rows in common (%d selected)", ratio, common, len(a), len(b))
		}
	}
}

// TestHiTopKCheck: frames with rows out of order, out of range or of the
// wrong width are rejected; bad options and params are errors.
func TestHiTopKCheck(t *testing.T) {
	f := enc(t, "hitopk", Options{K: 2}, []float32{3, 4, 1, 0, 0, -6, 2, 2}, 4, 2)
	for name, idx := range map[string][]uint32{"descending": {2, 0}, "repeated": {2, 2}, "out of range": {0, 4}} {
		g := *f
		g.Parts = slices.Clone(f.Parts)
		g.Parts[1].Data = u32bytes(idx)
		if _, err := FromFrame(&g); err == nil {
			t.Fatalf("%s indices accepted", name)
		}
	}
	g := *f
	g.Shape = []int64{2, 4}
	if _, err := FromFrame(&g); err == nil {
		t.Fatal("a frame of 2-wide rows accepted as 4-wide")
	}
	if _, err := New("hitopk", Options{RowSelector: "l1"}); err == nil {
		t.Fatal("selector l1 accepted")
	}
	g = *f
	g.Params = map[string]any{"ratio": 0.01, "k": int64(2), "selector": "sort"}
	if _, err := FromFrame(&g); err == nil {
		t.Fatal("params with selector sort accepted")
	}
}

// TestPropertyTopRowsL2: the selection (quickselect and the ties to the
// lowest rows) equals a full sort, on data with many equal sums.
func TestPropertyTopRowsL2(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ss := rapid.SliceOfN(rapid.SampledFrom([]float64{0, 1, 2, 2.5, 7, 1e300}), 1, 300).Draw(t, "ss")
		k := rapid.IntRange(0, len(ss)+1).Draw(t, "k")
		all := make([]uint32, len(ss))
		for i := range all {
			all[i] = uint32(i)
		}
		slices.SortStableFunc(all, func(a, b uint32) int {
			if ss[a] > ss[b] {
				return -1
			}
			if ss[a] < ss[b] {
				return 1
			}
			return 0
		})
		want := all[:max(0, min(k, len(ss)))]
		slices.Sort(want)
		if got := topRowsL2(ss, k); !slices.Equal(got, want) {
			t.Fatalf("k=%d: %v, sort gives %v", k, got, want)
		}
	})
}
