package serve

import (
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

func sampleRequest() *Request {
	return &Request{ID: 7, Op: OpSync, Step: 3, Average: true, Tensors: []Tensor{
		{Name: "w", DType: wire.F32, Shape: []int64{2, 3}, Seg: 1, Off: 64, Len: 24},
		{Name: "b", DType: wire.F32, Shape: []int64{2}, Inline: true, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8}},
	}}
}

func TestRequestRoundTrip(t *testing.T) {
	want := sampleRequest()
	got, err := DecodeRequest(AppendRequest(nil, want), Limits{})
	require.NoError(t, err)
	require.Equal(t, want, got)
	for _, op := range []*Request{{ID: 1, Op: OpPing}, {ID: 2, Op: OpAttach, Seg: 5}, {ID: 3, Op: OpDetach, Seg: 5}} {
		got, err := DecodeRequest(AppendRequest(nil, op), Limits{})
		require.NoError(t, err)
		require.Equal(t, op, got)
	}
}

// rawMap builds a request map from key/value appenders (any order, any
// content), for malformed requests.
func rawMap(kv ...func([]byte) []byte) []byte {
	b := appendMapLen(nil, len(kv)/2)
	for _, f := range kv {
		b = f(b)
	}
	return b
}

func s(v string) func([]byte) []byte { return func(b []byte) []byte { return appendStr(b, v) } }
func i(v int64) func([]byte) []byte  { return func(b []byte) []byte { return appendInt(b, v) } }
func raw(v ...byte) func([]byte) []byte {
	return func(b []byte) []byte { return append(b, v...) }
}

// tensorsWith is a tensors array holding one tensor map with the given
// keys (appenders).
func tensorsWith(kv ...func([]byte) []byte) func([]byte) []byte {
	return func(b []byte) []byte { return append(appendArrayLen(b, 1), rawMap(kv...)...) }
}

func TestRequestErrorsNameFieldAndID(t *testing.T) {
	shape := func(dims ...int64) func([]byte) []byte {
		return func(b []byte) []byte {
			b = appendArrayLen(b, len(dims))
			for _, d := range dims {
				b = appendInt(b, d)
			}
			return b
		}
	}
	cases := []struct {
		name  string
		msg   []byte
		id    int64
		field string
	}{
		{"no id", rawMap(s("op"), s("ping")), -1, "id"},
		{"id after error", rawMap(s("op"), i(5), s("id"), i(9)), 9, "op"},
		{"unknown op", rawMap(s("id"), i(1), s("op"), s("frobnicate")), 1, "op"},
		{"negative step", rawMap(s("id"), i(2), s("op"), s("sync"), s("step"), i(-1)), 2, "step"},
		{"attach without seg", rawMap(s("id"), i(3), s("op"), s("attach")), 3, "seg"},
		{"bad dtype", rawMap(s("id"), i(4), s("op"), s("sync"), s("tensors"), tensorsWith(s("name"), s("x"), s("dtype"), s("f33"), s("shape"), shape(1), s("data"), raw(0xc4, 4, 0, 0, 0, 0))), 4, "tensors[0].dtype"},
		{"length mismatch", rawMap(s("id"), i(5), s("op"), s("sync"), s("tensors"), tensorsWith(s("name"), s("x"), s("dtype"), s("f32"), s("shape"), shape(2), s("seg"), i(0), s("off"), i(0), s("len"), i(4))), 5, "tensors[0].len"},
		{"missing off", rawMap(s("id"), i(6), s("op"), s("sync"), s("tensors"), tensorsWith(s("name"), s("x"), s("dtype"), s("f32"), s("shape"), shape(1), s("seg"), i(0), s("len"), i(4))), 6, "tensors[0].off"},
		{"too many dims", rawMap(s("id"), i(7), s("op"), s("sync"), s("tensors"), tensorsWith(s("name"), s("x"), s("dtype"), s("f32"), s("shape"), shape(make([]int64, 17)...))), 7, "tensors[0].shape"},
		{"overflowing shape", rawMap(s("id"), i(8), s("op"), s("sync"), s("tensors"), tensorsWith(s("name"), s("x"), s("dtype"), s("f32"), s("shape"), shape(1<<40, 1<<40), s("data"), raw(0xc4, 0))), 8, "tensors[0].shape"},
		{"unknown option", rawMap(s("id"), i(9), s("op"), s("sync"), s("opts"), raw(0x81, 0xa3, 'f', 'o', 'o', 0xc3)), 9, "opts.foo"},
		{"lying array", rawMap(s("id"), i(10), s("op"), s("sync"), s("tensors"), raw(0xdd, 0xff, 0xff, 0xff, 0xff)), 10, "tensors"},
		{"deep nesting skipped", rawMap(s("id"), i(11), s("op"), s("sync"), s("junk"), raw(append(repeat(0x91, 40), 0xc0)...)), 11, "junk"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := DecodeRequest(c.msg, Limits{})
			var re *RequestError
			require.ErrorAs(t, err, &re)
			require.Equal(t, c.id, re.ID, "%v", err)
			require.Equal(t, c.field, re.Field, "%v", err)
		})
	}
}

func repeat(b byte, n int) []byte {
	out := make([]byte, n)
	for k := range out {
		out[k] = b
	}
	return out
}

// Unknown keys are skipped, so requests can grow.
func TestRequestUnknownKeysIgnored(t *testing.T) {
	msg := rawMap(s("id"), i(1), s("future"), raw(0x92, 0xc3, 0xcb, 0, 0, 0, 0, 0, 0, 0, 0), s("op"), s("ping"))
	r, err := DecodeRequest(msg, Limits{})
	require.NoError(t, err)
	require.Equal(t, OpPing, r.Op)
}

func TestReplyRoundTrip(t *testing.T) {
	want := &Reply{ID: 3, OK: false, Code: CodePeer, Error: "rank 2 failed", Field: "", Rank: 2, Size: 0, Data: [][]byte{{}, {1, 2}}}
	got, err := DecodeReply(AppendReply(nil, want))
	require.NoError(t, err)
	require.Equal(t, want, got)
}

func FuzzDecodeRequest(f *testing.F) {
	f.Add(AppendRequest(nil, sampleRequest()))
	f.Add(AppendRequest(nil, &Request{ID: 1, Op: OpPing}))
	f.Add(AppendRequest(nil, &Request{ID: 2, Op: OpAttach, Seg: 3}))
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, msg []byte) {
		r, err := DecodeRequest(msg, Limits{MaxTensors: 64})
		if err != nil {
			return
		}
		again, err := DecodeRequest(AppendRequest(nil, r), Limits{MaxTensors: 64})
		if err != nil {
			t.Fatalf("re-encoded request does not decode: %v", err)
		}
		if len(again.Tensors) != len(r.Tensors) || again.ID != r.ID || again.Op != r.Op {
			t.Fatalf("round trip changed the request: %+v vs %+v", r, again)
		}
	})
}

// The reply bytes docs/serve.md shows.
func TestReplyGolden(t *testing.T) {
	got := AppendReply(nil, &Reply{ID: 2, OK: true, Rank: -1, Data: [][]byte{{}}})
	want := "88 a2 69 64 02 a2 6f 6b c3 a4 63 6f 64 65 a0 a5 65 72 72 6f 72 a0 a5 66 69 65 6c 64 a0 a4 72 61 6e 6b ff a4 73 69 7a 65 00 a4 64 61 74 61 91 c4 00"
	require.Equal(t, want, spaced(got))
}

func spaced(b []byte) string {
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 3*len(b))
	for k, c := range b {
		if k > 0 {
			out = append(out, ' ')
		}
		out = append(out, hex[c>>4], hex[c&15])
	}
	return string(out)
}
