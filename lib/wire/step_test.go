package wire

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stepStream writes two steps of one dense frame each, with step ends.
func stepStream(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewWriter(&buf, "test/1")
	for step := range int64(2) {
		require.NoError(t, w.Write(&Dense{Name: "g", Step: step, Rank: 0, DType: U8, Shape: []int64{1}, Data: []byte{byte(step)}}))
		require.NoError(t, w.EndStep(step))
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func TestStepEndCanonicalBytes(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, "p")
	require.NoError(t, w.EndStep(300))
	want := []byte{0x83, 0xa1, 't', 0xa8, 's', 't', 'e', 'p', '_', 'e', 'n', 'd', 0xa1, 'v', 0x01,
		0xa4, 's', 't', 'e', 'p', 0xcd, 0x01, 0x2c}
	assert.True(t, bytes.HasSuffix(buf.Bytes(), want), "got % x", buf.Bytes())
}

func TestStepEndIsStructure(t *testing.T) {
	b := stepStream(t)
	// NextFrame returns it; it is not counted in the end frame.
	r := NewReader(bytes.NewReader(b), Limits{})
	var types []string
	for {
		f, err := r.NextFrame()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		types = append(types, f.Type())
		if e, ok := f.(*End); ok {
			assert.Equal(t, int64(2), e.Count)
		}
		if s, ok := f.(*StepEnd); ok {
			assert.Equal(t, int64(len(types)/2-1), s.Step)
		}
	}
	assert.Equal(t, []string{"header", "dense", "step_end", "dense", "step_end", "end"}, types)
	// Next skips it, like headers and ends.
	out, err := readAll(NewReader(bytes.NewReader(b), Limits{}))
	require.NoError(t, err)
	require.Len(t, out, 2)
	// It re-encodes byte for byte.
	again, err := recode(t, b)
	require.NoError(t, err)
	assert.Equal(t, b, again)
}

func TestStepEndOutsideStream(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf, "x")
	e := encoder{enc: w.enc, bw: w.bw}
	require.NoError(t, e.frame(&StepEnd{Step: 1}))
	require.NoError(t, w.bw.Flush())
	_, err := readAll(NewReader(bytes.NewReader(buf.Bytes()), Limits{}))
	var de *DecodeError
	require.ErrorAs(t, err, &de)
	assert.Equal(t, int64(0), de.Frame)
	assert.Contains(t, err.Error(), "step_end frame outside a stream")
}

func TestStepEndMalformed(t *testing.T) {
	cases := map[string]string{
		"no step":       "\x82\xa1t\xa8step_end\xa1v\x01",
		"negative step": "\x83\xa1t\xa8step_end\xa1v\x01\xa4step\xff",
		"str step":      "\x83\xa1t\xa8step_end\xa1v\x01\xa4step\xa11",
	}
	want := map[string]string{"no step": `field "step": missing`, "negative step": "negative step -1", "str step": "is str, want int"}
	for name, raw := range cases {
		_, err := readAll(NewReader(bytes.NewReader(rawStream(t, []byte(raw), 0)), Limits{}))
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), want[name], name)
		assert.Contains(t, err.Error(), "frame 1 (step_end) at byte", name)
	}
}
