package wire

import (
	"bytes"
	"io"
	"testing"
)

// fuzzLimits keep the fuzzer's memory small; the reader must honour them.
var fuzzLimits = Limits{MaxPayload: 1 << 20, MaxElems: 1 << 12, MaxString: 1 << 12}

// recode reads every frame of b (headers and ends included) and writes
// them back canonically, one Writer per stream.
func recode(t testing.TB, b []byte) ([]byte, error) {
	r := NewReader(bytes.NewReader(b), fuzzLimits)
	var out bytes.Buffer
	var w *Writer
	for {
		f, err := r.NextFrame()
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		switch f := f.(type) {
		case *Header:
			w = NewWriterHeader(&out, *f)
			if err := w.start(); err != nil {
				t.Fatalf("re-encoding header: %v", err)
			}
		case *End:
			if err := w.Close(); err != nil {
				t.Fatalf("re-encoding end: %v", err)
			}
		default:
			if err := w.Write(f); err != nil {
				t.Fatalf("re-encoding a frame the reader accepted: %v", err)
			}
		}
	}
}

// FuzzReader feeds arbitrary bytes to the reader: it must never panic and
// never allocate past its limits; what it accepts must survive a canonical
// re-encoding unchanged (decode∘encode is the identity on canonical bytes).
func FuzzReader(f *testing.F) {
	f.Add(encodeStream(f, sampleFrames()...))
	f.Add(encodeStream(f))
	f.Add(stepStream(f))
	for _, fr := range sampleFrames() {
		f.Add(encodeStream(f, fr))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		once, err := recode(t, b)
		if err != nil {
			return
		}
		twice, err := recode(t, once)
		if err != nil {
			t.Fatalf("canonical re-encoding does not decode: %v", err)
		}
		if !bytes.Equal(once, twice) {
			t.Fatalf("re-encoding is not stable:\n% x\n% x", once, twice)
		}
	})
}

// FuzzDense builds dense frames from fuzzed fields: whatever the Writer
// accepts, the Reader must return bit for bit.
func FuzzDense(f *testing.F) {
	f.Add("w", int64(3), int64(-1), "f32", int64(2), []byte("01234567"))
	f.Add("", int64(0), int64(0), "u8", int64(0), []byte{})
	f.Fuzz(func(t *testing.T, name string, step, rank int64, dtype string, n int64, data []byte) {
		d := &Dense{Name: name, Step: step, Rank: rank, DType: DType(dtype), Shape: []int64{n}, Data: data}
		var buf bytes.Buffer
		w := NewWriter(&buf, "fuzz")
		if err := w.Write(d); err != nil {
			return
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		r := NewReader(&buf, Limits{})
		got, err := r.Next()
		if err != nil {
			t.Fatalf("reading back a frame the writer accepted: %v", err)
		}
		g := got.(*Dense)
		if g.Name != name || g.Step != step || g.Rank != rank || g.DType != d.DType || !bytes.Equal(g.Data, data) {
			t.Fatalf("round trip changed the frame: %+v", g)
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("after the only frame: %v", err)
		}
	})
}
