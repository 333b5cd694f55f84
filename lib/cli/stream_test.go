package cli

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/wire"
)

func u8(name string) *wire.Dense {
	return &wire.Dense{Name: name, Rank: -1, DType: wire.U8, Shape: []int64{1}, Data: []byte{1}}
}

// steps reads every step of b as "names|step_end" strings.
func steps(t *testing.T, b []byte) []string {
	t.Helper()
	sr := NewStepReader("x.tw", bytes.NewReader(b), wire.Limits{})
	var out []string
	for {
		fs, end, err := sr.NextStep()
		if err == io.EOF {
			return out
		}
		require.NoError(t, err)
		s := ""
		for _, f := range fs {
			s += f.(*wire.Dense).Name
		}
		if end != nil {
			s += "|" + string(rune('0'+end.Step))
		}
		out = append(out, s)
	}
}

func TestStepReader(t *testing.T) {
	// No step ends: the whole input (every stream of it) is one step.
	two := append(stream(t, u8("a"), u8("b")), stream(t, u8("c"))...)
	assert.Equal(t, []string{"abc"}, steps(t, two))
	// Step ends, then frames after the last one: a final step without one.
	b := stream(t, u8("a"), &wire.StepEnd{Step: 1}, &wire.StepEnd{Step: 2}, u8("b"), u8("c"), &wire.StepEnd{Step: 3}, u8("d"))
	assert.Equal(t, []string{"a|1", "|2", "bc|3", "d"}, steps(t, b))
	// Errors name the file.
	sr := NewStepReader("x.tw", bytes.NewReader(b[:len(b)-3]), wire.Limits{})
	var err error
	for err == nil {
		_, _, err = sr.NextStep()
	}
	assert.ErrorIs(t, err, wire.ErrTruncated)
	assert.Contains(t, err.Error(), "x.tw: ")
}

func TestStepFilter(t *testing.T) {
	var out bytes.Buffer
	w := wire.NewWriter(&out, "test")
	var seen []string
	f := StepFilter{Out: w,
		Frame: func(fr wire.Frame) error { return w.Write(u8(fr.(*wire.Dense).Name + "'")) },
		Step:  func(s *wire.StepEnd) error { seen = append(seen, "step"); return nil },
	}
	in := stream(t, u8("a"), &wire.StepEnd{Step: 1}, u8("b"))
	require.NoError(t, f.Run(nil, bytes.NewReader(in), wire.Limits{}))
	require.NoError(t, w.Close())
	r := wire.NewReader(&out, wire.Limits{})
	var got []string
	for {
		fr, err := r.NextFrame()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		got = append(got, fr.Type())
	}
	assert.Equal(t, []string{"header", "dense", "step_end", "dense", "end"}, got)
	assert.Equal(t, []string{"step"}, seen)
}

// stream writes frames as one stream.
func stream(t *testing.T, frames ...wire.Frame) []byte {
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	for _, f := range frames {
		require.NoError(t, w.Write(f))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}
