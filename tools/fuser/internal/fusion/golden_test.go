package fusion

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/costmodel"
)

// The golden examples of specs/seed-cupcake-gemini.md D.3 (sizes in MB,
// times in ms).
type golden struct {
	name           string
	size, b        []float64
	a              float64
	ag, bg, ah, bh float64
	layerwise      float64
	fuseAll        float64
	opt            float64
	groups         []Group
}

var goldens = []golden{
	{name: "G1", size: []float64{4, 0.5, 0.5, 8, 2}, b: []float64{2, 1, 1, 3, 2}, a: 5,
		ag: 0.5, bg: 0.25, ah: 1.0, bh: 0.05, layerwise: 20.75, fuseAll: 20.00, opt: 18.40,
		groups: []Group{{0, 3}, {4, 4}}},
	{name: "G2", size: []float64{0.1, 0.1, 16, 0.1, 0.1, 25, 0.2, 9}, b: []float64{0.3, 0.2, 2.5, 0.2, 0.2, 3.5, 0.3, 1.5},
		a: 8, ag: 0.2, bg: 0.4, ah: 0.6, bh: 0.02, layerwise: 34.484, fuseAll: 38.752, opt: 32.764,
		// Tied with [(0,2),(3,6),(7,7)]: the tie-break picks fewer groups,
		// then smaller ends.
		groups: []Group{{0, 2}, {3, 5}, {6, 7}}},
	{name: "G3", size: []float64{0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5},
		b: []float64{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, a: 4, ag: 0.1, bg: 0.3, ah: 2.0, bh: 0.01,
		layerwise: 34.30, fuseAll: 17.65, opt: 17.65, groups: []Group{{0, 9}}},
}

func (g golden) problem(t *testing.T) *Problem {
	p, err := NewProblem(g.a, g.size, g.b, costmodel.Linear{Alpha: g.ag, Beta: g.bg}, costmodel.Linear{Alpha: g.ah, Beta: g.bh})
	require.NoError(t, err)
	return p
}

func TestGoldens(t *testing.T) {
	for _, g := range goldens {
		t.Run(g.name, func(t *testing.T) {
			p := g.problem(t)
			assert.InDelta(t, g.layerwise, p.Time(LayerWise(p.N())), 1e-9)
			assert.InDelta(t, g.fuseAll, p.Time(FuseAll(p.N())), 1e-9)
			for _, algo := range []string{AlgoAlg51, AlgoPareto, AlgoBrute, AlgoAuto} {
				r, err := Plan(p, algo, Alg51Options{})
				require.NoError(t, err)
				assert.InDelta(t, g.opt, r.Time, 1e-9, algo)
				assert.Equal(t, g.groups, r.Groups, algo)
				assert.True(t, r.ProvenOptimal, algo)
			}
		})
	}
}

func TestG1Timeline(t *testing.T) {
	p := goldens[0].problem(t)
	f, steps := p.Eval([]Group{{0, 3}, {4, 4}})
	assert.InDelta(t, 18.40, f, 1e-9)
	want := []Step{
		{Group: Group{0, 3}, Bytes: 13, BPEnd: 7.00, CompEnd: 8.65, CommStart: 8.65, CommEnd: 12.40},
		{Group: Group{4, 4}, Bytes: 2, BPEnd: 10.65, CompEnd: 11.75, CommStart: 12.40, CommEnd: 13.40},
	}
	for i := range want {
		assert.InDelta(t, want[i].BPEnd, steps[i].BPEnd, 1e-9)
		assert.InDelta(t, want[i].CompEnd, steps[i].CompEnd, 1e-9)
		assert.InDelta(t, want[i].CommStart, steps[i].CommStart, 1e-9)
		assert.InDelta(t, want[i].CommEnd, steps[i].CommEnd, 1e-9)
		assert.InDelta(t, want[i].Bytes, steps[i].Bytes, 1e-9)
	}
}

func TestG1Alg51Calls(t *testing.T) {
	_, _, st, complete := Alg51(goldens[0].problem(t), Alg51Options{})
	assert.True(t, complete)
	assert.Equal(t, int64(19), st.Nodes, "FindOptFusion calls")
}
