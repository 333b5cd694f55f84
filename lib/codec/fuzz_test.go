package codec

import (
	"testing"

	"trainwire.dev/lib/wire"
)

// FuzzDecode feeds every decoder frames built from a real encoding with
// fuzzed bytes, part lengths, shapes and params: Decode must return an
// error or a tensor of the frame's size, never panic or over-read.
func FuzzDecode(f *testing.F) {
	f.Add(uint8(0), uint16(100), uint8(0), []byte{}, int8(0), false)
	f.Add(uint8(3), uint16(9), uint8(1), []byte{0xff, 0x01}, int8(-1), false)
	f.Add(uint8(7), uint16(1000), uint8(2), []byte{0x80, 0x80, 0x80}, int8(1), true)
	f.Add(uint8(11), uint16(64), uint8(3), []byte{0x7f, 0, 0, 0x80}, int8(0), true)
	f.Add(uint8(5), uint16(300), uint8(0x81), []byte{0xff, 0x7f}, int8(0), false)
	algos := Algos()
	f.Fuzz(func(t *testing.T, a uint8, d uint16, pi uint8, flip []byte, dlen int8, reshape bool) {
		algo := algos[int(a)%len(algos)]
		n := int(d) % 5000
		shape := []int64{int64(n)}
		if reshape && n%4 == 0 && n > 0 {
			shape = []int64{4, int64(n / 4)}
		}
		o := Options{Ratio: 0.05, Rank: 2}
		if pi&0x80 != 0 { // the opt-in encodings: wide qsgd, clipped terngrad, dgc warm-up
			o.Levels, o.Clip, o.DGCWarmup = 1000, 2.5, 3
		}
		c, err := New(algo, o)
		if err != nil {
			t.Fatal(err)
		}
		x := gauss(n, uint64(n))
		fr, err := c.Encode(Input{Name: "w", Shape: shape, Data: x})
		if err != nil {
			t.Fatal(err)
		}
		if len(fr.Parts) > 0 {
			p := &fr.Parts[int(pi)%len(fr.Parts)]
			data := append([]byte(nil), p.Data...)
			for i, b := range flip {
				if len(data) > 0 {
					data[(i*7919)%len(data)] ^= b
				}
			}
			switch {
			case dlen < 0 && len(data) > 0:
				data = data[:max(0, len(data)+int(dlen))]
			case dlen > 0:
				data = append(data, make([]byte, dlen)...)
			}
			p.Data = data
		}
		if reshape && n%4 != 0 {
			fr.Shape = []int64{int64(n) + int64(dlen)}
		}
		y, err := Decode(fr, nil)
		if err != nil {
			return
		}
		if num, _ := wire.Numel(fr.Shape); int64(len(y)) != num {
			t.Fatalf("%s: decoded %d elements for shape %v", algo, len(y), fr.Shape)
		}
	})
}

// FuzzFromParams feeds arbitrary params to every codec's frame reader.
func FuzzFromParams(f *testing.F) {
	f.Add(uint8(0), int64(3), 0.5, false)
	f.Add(uint8(5), int64(-1), -2.0, true)
	f.Fuzz(func(t *testing.T, a uint8, iv int64, fv float64, bv bool) {
		algos := Algos()
		algo := algos[int(a)%len(algos)]
		m := map[string]any{"ratio": fv, "k": iv, "seed": iv, "samplings": iv, "levels": iv, "rank": iv,
			"threshold": fv, "momentum": fv, "unbiased": bv}
		if bv { // the opt-in params
			m["clip"], m["warmup"] = fv, iv
		}
		fr := &wire.Compressed{Name: "w", Algo: algo, Params: m, DType: wire.F32, Shape: []int64{10}}
		_, _ = Decode(fr, nil)
	})
}
