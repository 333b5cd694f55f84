package wire

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPeekType(t *testing.T) {
	var b bytes.Buffer
	w := NewWriter(&b, "test")
	require.NoError(t, w.Write(&Dense{Name: "x", DType: F32, Shape: []int64{1}, Data: make([]byte, 4)}))
	require.NoError(t, w.Close())
	s := b.Bytes()
	typ, ok := PeekType(s)
	require.True(t, ok)
	require.Equal(t, TypeHeader, typ)
	// Every frame of the stream, at its start.
	r := NewReader(bytes.NewReader(s), Limits{})
	var types []string
	for {
		at := r.Offset()
		f, err := r.NextFrame()
		if err != nil {
			break
		}
		got, ok := PeekType(s[at:])
		require.True(t, ok, "frame %s at %d", f.Type(), at)
		require.Equal(t, f.Type(), got)
		types = append(types, got)
	}
	require.Equal(t, []string{TypeHeader, TypeDense, TypeEnd}, types)
	// Non-canonical but valid encodings: map16, str8 keys.
	typ, ok = PeekType([]byte("\xde\x00\x05\xd9\x01t\xd9\x06header\xd9\x01v\x01"))
	require.True(t, ok)
	require.Equal(t, TypeHeader, typ)
	// Not frames: a map code followed by anything else, too short, empty.
	for _, in := range []string{"", "\x85", "\x85\xa1t", "\x85\xa1t\xa6header", "\x81\xa1t\xa6header\xa1v", "\x85\xa1x\xa6header\xa1v",
		"\x85\xa1t\xc4\x06header\xa1v", "\x85\x01\x02\x03\x04\x05\x06", "\xde\x00", "\xdf\x00\x00\x00\x05\x00", "\xa1t"} {
		_, ok := PeekType([]byte(in))
		require.False(t, ok, "%q", in)
	}
	require.LessOrEqual(t, 5+2+2+6+2, PeekLen)
}
