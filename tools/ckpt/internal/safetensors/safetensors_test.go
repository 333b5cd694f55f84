package safetensors

import (
	"bytes"
	"encoding/binary"
	"testing"

	"trainwire.dev/lib/wire"
)

func file(hdr string, data int) []byte {
	b := make([]byte, 8+len(hdr)+data)
	binary.LittleEndian.PutUint64(b, uint64(len(hdr)))
	copy(b[8:], hdr)
	return b
}

func TestParse(t *testing.T) {
	good := file(`{"__metadata__":{"a":"b"},"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},"b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]}}`, 22)
	ts, err := Parse(good)
	if err != nil || len(ts) != 2 || ts[0].Name != "w" || ts[1].End != 22 {
		t.Fatalf("Parse = %+v, %v", ts, err)
	}
	for name, b := range map[string][]byte{
		"short":      {1, 2, 3},
		"huge len":   append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, '{', '}'),
		"not json":   file(`nope`, 0),
		"bad dtype":  file(`{"w":{"dtype":"X","shape":[1],"data_offsets":[0,1]}}`, 1),
		"size":       file(`{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 4),
		"outside":    file(`{"w":{"dtype":"U8","shape":[9],"data_offsets":[0,9]}}`, 4),
		"hole":       file(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}`, 4),
		"neg shape":  file(`{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`, 0),
		"trailing":   file(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 4),
		"bad offset": file(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[0]}}`, 2),
	} {
		if _, err := Parse(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(file(`{"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}`, 16))
	f.Add(file(`{}`, 0))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		ts, err := Parse(b)
		if err != nil {
			return
		}
		for _, x := range ts {
			if x.Begin < 0 || x.End < x.Begin || x.End > int64(len(b)) {
				t.Fatalf("accepted out-of-range tensor %+v in %d bytes", x, len(b))
			}
		}
	})
}

func TestConvertRoundTrip(t *testing.T) {
	ds := []*wire.Dense{
		wire.NewDenseF32("b", []float32{1, 2, 3}, 3),
		{Name: "a", Rank: -1, DType: "i64", Shape: []int64{2}, Data: make([]byte, 16)},
	}
	var buf bytes.Buffer
	if err := Write(&buf, ds); err != nil {
		t.Fatal(err)
	}
	got, err := Dense(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "b" || got[1].Name != "a" || !bytes.Equal(got[0].Data, ds[0].Data) || got[1].DType != "i64" {
		t.Fatalf("round trip: %+v", got)
	}
}
