package wire

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTextIsNotAStream: JSON or other text where a stream is expected is
// named as such, with the frame index and byte offset, not as a frame of
// the wrong msgpack type.
func TestTextIsNotAStream(t *testing.T) {
	var stream bytes.Buffer
	w := NewWriter(&stream, "test")
	require.NoError(t, w.Close())
	for _, tc := range []struct {
		name, in, want string
		frame, off     int64
	}{
		{"json object", `{"traceEvents": [{"ph": "X"}]}`, `this looks like JSON, not a trainwire stream (it starts with "{\"traceEvents\": [{\"ph\": \"X\"}]}")`, 0, 0},
		{"json array", "[1, 2]\n", `this looks like JSON, not a trainwire stream (it starts with "[1, 2]")`, 0, 0},
		{"pretty json", "\n  {\n  \"name\": \"bert\"\n}", `this looks like JSON, not a trainwire stream (it starts with "{")`, 0, 0},
		{"usage text", "Usage: hashsync gen --preset=STRING\n", `this looks like text, not a trainwire stream (it starts with "Usage: hashsync gen --preset=STRING")`, 0, 0},
		{"json after a stream", stream.String() + `{"a": 1}`, `this looks like JSON`, 2, int64(stream.Len())},
		{"stray byte", "\x01\x02", "not a trainwire stream: byte 0x01 cannot start a frame", 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readFrames([]byte(tc.in))
			var de *DecodeError
			require.ErrorAs(t, err, &de)
			require.ErrorIs(t, err, ErrNotStream)
			assert.Equal(t, tc.frame, de.Frame)
			assert.Equal(t, tc.off, de.Offset)
			assert.Contains(t, err.Error(), tc.want)
			assert.True(t, strings.HasPrefix(err.Error(), "wire: frame "), err.Error())
		})
	}
}
