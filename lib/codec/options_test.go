package codec

import (
	"encoding/binary"
	"math"
	"testing"

	"trainwire.dev/lib/wire"
)

// The opt-in semantics: each leaves the default frames as they were (the
// golden tests cover those) and is checked here.

// TestTernGradClip: with clip c the scale is min(max|x|, float32(c·σ)),
// elements beyond it always go out as ±scale, the frame names the clip,
// and the estimate is unbiased for the clipped tensor.
func TestTernGradClip(t *testing.T) {
	x := gauss(64, 77)
	x[3], x[40] = 25, -30 // outliers far beyond 2.5σ
	var mean, ss float64
	for _, v := range x {
		mean += float64(v)
	}
	mean /= float64(len(x))
	for _, v := range x {
		ss += (float64(v) - mean) * (float64(v) - mean)
	}
	s := float32(2.5 * math.Sqrt(ss/float64(len(x))))
	c := mustNew(t, "terngrad", Options{Clip: 2.5})
	f, err := c.Encode(Input{Name: "w", Data: x})
	if err != nil {
		t.Fatal(err)
	}
	if got := f32at(f.Parts[1].Data, 0); got != s {
		t.Fatalf("scale %v, want 2.5σ = %v", got, s)
	}
	if f.Params["clip"] != 2.5 {
		t.Fatalf("params %v lack clip", f.Params)
	}
	if _, ok := mustNew(t, "terngrad", Options{}).Params()["clip"]; ok {
		t.Fatal("clip in the params of the default codec")
	}
	y, err := Decode(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	if y[3] != s || y[40] != -s {
		t.Fatalf("outliers decode to %v %v, want ±%v", y[3], y[40], s)
	}
	const trials = 10000
	m := meanOver(t, "terngrad", Options{Clip: 2.5}, x, trials)
	for i, v := range x {
		cl := math.Max(-float64(s), math.Min(float64(s), float64(v)))
		a := math.Abs(cl)
		se := math.Sqrt(a * (float64(s) - a) / trials)
		if math.Abs(m[i]-cl) > 5*se+1e-6 {
			t.Errorf("element %d: mean %v, clipped x %v, 5σ %v", i, m[i], cl, 5*se)
		}
	}
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := New("terngrad", Options{Clip: bad}); err == nil {
			t.Errorf("clip %v accepted", bad)
		}
	}
	f.Params["clip"] = 0.0
	if _, err := FromFrame(f); err == nil {
		t.Error("a frame with clip 0 accepted")
	}
}

// TestQSGDWide: above 127 levels the codes are int16, the size 2d + 4,
// every element within one level of the input, and the estimate unbiased.
func TestQSGDWide(t *testing.T) {
	const lv = 1000
	x := gauss(4099, 5)
	c := mustNew(t, "qsgd", Options{Levels: lv, Seed: 9})
	f, err := c.Encode(Input{Name: "w", Data: x})
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(len(f.Parts[0].Data) + len(f.Parts[1].Data)); got != c.Size([]int64{4099}) || got != 2*4099+4 {
		t.Fatalf("%d bytes, Size %d", got, c.Size([]int64{4099}))
	}
	if f.Parts[1].DType != wire.I16 {
		t.Fatalf("codes are %s", f.Parts[1].DType)
	}
	y, err := Decode(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	norm := float64(f32at(f.Parts[0].Data, 0))
	for i := range x {
		if d := math.Abs(float64(y[i] - x[i])); d > norm/lv*1.0001 {
			t.Fatalf("element %d: %v decodes to %v, beyond one level %v", i, x[i], y[i], norm/lv)
		}
	}
	// Golden: norm 5, levels 1000: 3 → 600 exactly, −4 → −800, 0 → 0.
	g, err := mustNew(t, "qsgd", Options{Levels: lv}).Encode(Input{Name: "w", Data: []float32{3, -4, 0}})
	if err != nil {
		t.Fatal(err)
	}
	if b := g.Parts[1].Data; int16(binary.LittleEndian.Uint16(b)) != 600 || int16(binary.LittleEndian.Uint16(b[2:])) != -800 || b[4] != 0 || b[5] != 0 {
		t.Fatalf("codes % x", b)
	}
	// A code beyond the levels is a clear error.
	binary.LittleEndian.PutUint16(g.Parts[1].Data, uint16(lv+1))
	if _, err := Decode(g, nil); err == nil {
		t.Fatal("code beyond the levels accepted")
	}
	const trials = 4000
	xs := gauss(16, 6)
	m := meanOver(t, "qsgd", Options{Levels: 200}, xs, trials)
	var n2 float64
	for _, v := range xs {
		n2 += float64(v) * float64(v)
	}
	n := math.Sqrt(n2)
	for i, v := range xs {
		q := 200 * math.Abs(float64(v)) / n
		fr := q - math.Floor(q)
		se := math.Sqrt(fr * (1 - fr) * (n / 200) * (n / 200) / trials)
		if math.Abs(m[i]-float64(v)) > 5*se+1e-6 {
			t.Errorf("element %d: mean %v, x %v, 5σ %v", i, m[i], v, 5*se)
		}
	}
	if _, err := New("qsgd", Options{Levels: 32768}); err == nil {
		t.Error("levels 32768 accepted")
	}
}
