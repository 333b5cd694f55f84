package codec

import (
	"bytes"
	"testing"

	"trainwire.dev/lib/wire"
)

// FuzzPartOf reads a chunk frame of a partitioned tensor whose marks,
// name and shape are fuzzed, through the wire: PartOf must refuse it or
// describe a chunk that Decode and Join accept, never panic or index out
// of range.
func FuzzPartOf(f *testing.F) {
	f.Add(int64(1), int64(4), "w[1/4]", int64(10), int64(3), false)
	f.Add(int64(0), int64(1), "w[0/1]", int64(0), int64(0), false)
	f.Add(int64(5), int64(3), "w[5/3]", int64(-1), int64(2), true)
	f.Add(int64(2), int64(65536), "x[2/65536]", int64(1<<40), int64(1), false)
	c, err := New("fp16", Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, part, parts int64, name string, dim, m int64, anyShape bool) {
		if m < 0 || m > 4096 {
			return
		}
		fr, err := c.Encode(Input{Name: name, Shape: []int64{m}, Data: make([]float32, m)})
		if err != nil {
			return
		}
		var shape any = []int64{dim}
		if anyShape {
			shape = []any{dim, "x"}
		}
		fr.Params[ParamPart], fr.Params[ParamParts], fr.Params[ParamTensorShape] = part, parts, shape
		var buf bytes.Buffer
		w := wire.NewWriter(&buf, "fuzz")
		if w.Write(fr) != nil || w.Close() != nil {
			return
		}
		g, err := wire.NewReader(&buf, wire.DefaultLimits).Next()
		if err != nil {
			return
		}
		cf, ok := g.(*wire.Compressed)
		if !ok {
			t.Fatalf("read back a %T", g)
		}
		info, isPart, err := PartOf(cf)
		if err != nil || !isPart {
			return
		}
		if info.Numel > 1<<24 {
			return // a valid mark for a tensor too large to join here
		}
		y, err := Decode(cf, nil)
		if err != nil {
			return
		}
		if err := Join(make([]float32, info.Numel), info, y); err != nil {
			t.Fatalf("PartOf accepted %+v but Join refused: %v", info, err)
		}
	})
}
