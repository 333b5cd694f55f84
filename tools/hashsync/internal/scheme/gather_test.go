package scheme

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/zen"
)

// gatherOnce writes each part's rows, ascending, with their values, for
// parts listed in any order (Algorithm 1's are in hash order), and refuses
// parts that do not cover every row exactly once, writing nothing.
func TestGatherOnce(t *testing.T) {
	const n, w = 4, 3
	rng := rand.New(rand.NewPCG(5, 6))
	in := randTensor(rng, "g", 50_000, w, 0.1, false)
	lists := make([][]int32, n)
	for k := range in.Idx {
		j := rng.IntN(n)
		lists[j] = append(lists[j], int32(k))
	}
	parts := &zen.Parts{Off: []int{0}}
	for j := range lists {
		rng.Shuffle(len(lists[j]), func(a, b int) { lists[j][a], lists[j][b] = lists[j][b], lists[j][a] })
		parts.Pos = append(parts.Pos, lists[j]...)
		parts.Off = append(parts.Off, len(parts.Pos))
	}
	s := &Syncer{n: n}
	p := &Prepared{T: in, push: make([]message, n)}
	counts := make([]int, n)
	require.True(t, s.gatherOnce(p, parts, counts))
	for j := range n {
		want := slices.Clone(lists[j])
		slices.Sort(want)
		m := p.push[j]
		require.Equal(t, uint64(len(want)), m.n, "part %d", j)
		require.Equal(t, len(want), counts[j])
		idx := tensor.Uint32sOrCopy(m.body[:4*len(want)])
		val := tensor.Float32sOrCopy(m.body[4*len(want):])
		for c, k := range want {
			require.Equal(t, in.Idx[k], idx[c], "part %d, entry %d", j, c)
			require.Equal(t, in.Row(int(k)), val[c*w:c*w+w], "part %d, entry %d", j, c)
		}
	}

	for _, bad := range []func(*zen.Parts){
		func(q *zen.Parts) { q.Pos[1] = q.Pos[0] },                       // a row twice, another never
		func(q *zen.Parts) { q.Pos[0] = int32(len(in.Idx)) },             // a row that is not there
		func(q *zen.Parts) { q.Pos, q.Off[n] = q.Pos[1:], len(q.Pos)-1 }, // a row left out
	} {
		q := &zen.Parts{Off: slices.Clone(parts.Off), Pos: slices.Clone(parts.Pos)}
		bad(q)
		p := &Prepared{T: in, push: make([]message, n)}
		require.False(t, s.gatherOnce(p, q, make([]int, n)))
		for j := range n {
			require.Nil(t, p.push[j].body, "part %d written", j)
		}
	}
}
