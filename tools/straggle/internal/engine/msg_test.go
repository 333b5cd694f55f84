package engine

import (
	"math"
	"reflect"
	"testing"
)

func TestMsgRoundTrip(t *testing.T) {
	in := Msg{Kind: KindActivate, Round: 1 << 40, Epoch: 3, Step: 9, Rank: 2, Weight: 3, Loss: 0.25, Members: []int32{0, 1, 2, 3}, Probes: []int32{2, 3}}
	got, err := Decode(Tag(in.Kind), in.Encode(nil), 4)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("got %+v, want %+v", got, in)
	}
	d := Msg{Kind: KindData, Round: 5, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}, Loss: math.NaN()}
	got, err = Decode(Tag(KindData), d.Encode(nil), 4)
	if err != nil || len(got.Data) != 8 {
		t.Fatalf("data: %v %+v", err, got)
	}
	for _, bad := range []struct {
		tag uint32
		b   []byte
	}{
		{Tag(99), make([]byte, fixed)},
		{Tag(KindProbe), make([]byte, fixed-1)},
		{Tag(KindProbe), append(make([]byte, fixed), 1)},
		{Tag(KindActivate), make([]byte, fixed)},
		{Tag(KindData), append(make([]byte, fixed), 1, 2)},
	} {
		if _, err := Decode(bad.tag, bad.b, 4); err == nil {
			t.Errorf("tag %#x, %d bytes: no error", bad.tag, len(bad.b))
		}
	}
	big := Msg{Kind: KindActivate, Members: []int32{7}}
	if _, err := Decode(Tag(KindActivate), big.Encode(nil), 4); err == nil {
		t.Error("rank 7 in a world of 4 accepted")
	}
}

func FuzzDecodeMsg(f *testing.F) {
	a := Msg{Kind: KindActivate, Round: 1, Rank: 1, Members: []int32{0, 1}, Probes: []int32{1}}
	f.Add(Tag(KindActivate), a.Encode(nil))
	d := Msg{Kind: KindData, Data: make([]byte, 16)}
	f.Add(Tag(KindData), d.Encode(nil))
	f.Add(uint32(0), []byte{})
	f.Fuzz(func(t *testing.T, tag uint32, b []byte) {
		m, err := Decode(tag, b, 8)
		if err != nil {
			return
		}
		// What decodes re-encodes to the same bytes.
		back := m.Encode(nil)
		if string(back) != string(b) {
			t.Fatalf("re-encoding differs: %x vs %x", back, b)
		}
	})
}
