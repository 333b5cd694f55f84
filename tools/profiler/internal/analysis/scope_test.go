package analysis

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// HTA's scope: the last step and every event starting outside the kept
// steps go; times land on whole µs, starts up, ends down.
func TestScopeHTA(t *testing.T) {
	r := &Rank{
		Steps: []Span{{TS: 1_000, End: 5_000}, {TS: 5_000, End: 9_000}, {TS: 9_000, End: 12_000}},
		Spans: []Span{
			{TS: 500, End: 1_500, Name: "before the first step"},
			{TS: 1_200, End: 3_700, Name: "in step 0"},
			{TS: 4_999, End: 6_001, Name: "across steps 0 and 1"},
			{TS: 8_100, End: 8_900, Name: "in step 1"},
			{TS: 9_500, End: 10_000, Name: "in the last step"},
		},
		Runtime: map[int64]Span{7: {TS: 1_100, End: 1_900}},
		Mem:     []Mem{{TS: 900}, {TS: 2_500}, {TS: 9_100}},
	}
	require.True(t, r.ScopeHTA())
	require.Equal(t, []Span{{TS: 1_000, End: 5_000}, {TS: 5_000, End: 9_000}}, r.Steps)
	var names []string
	for _, s := range r.Spans {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"in step 0", "across steps 0 and 1", "in step 1"}, names)
	require.Equal(t, Span{TS: 2_000, End: 3_000, Name: "in step 0"}, r.Spans[0])
	require.Equal(t, Span{TS: 5_000, End: 6_000, Name: "across steps 0 and 1"}, r.Spans[1])
	require.Equal(t, Span{TS: 9_000, End: 9_000, Name: "in step 1"}, r.Spans[2]) // shorter than 1 µs after rounding
	require.Equal(t, Span{TS: 2_000, End: 1_000 + 1_000}, r.Runtime[7])
	require.Equal(t, []Mem{{TS: 3_000}}, r.Mem)

	one := &Rank{Steps: []Span{{TS: 0, End: 10}}, Spans: []Span{{TS: 1, End: 2}}}
	require.False(t, one.ScopeHTA())
	require.Len(t, one.Spans, 1)
	require.Equal(t, int64(-1000), floorUS(-1))
	require.Equal(t, int64(0), ceilUS(-1))
}
