package espresso

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tree reproduces the paper's |C| = 4341 and the spec's Appendix A
// (174 device-agnostic paths, in order), line for line.
func TestTreeCounts(t *testing.T) {
	tr := NewTree(0)
	require.Len(t, tr.Paths, 174)
	assert.Equal(t, 4341, tr.Count())
	golden, err := os.ReadFile("../../testdata/plan/paths-174.txt")
	require.NoError(t, err)
	want := strings.Split(strings.TrimSpace(string(golden)), "\n")
	require.Len(t, want, 174)
	for i, p := range tr.Paths {
		assert.Equal(t, want[i], p.String(), "path %d", i+1)
	}
	byComps := map[int]int{}
	flat, plain, flatCount := 0, 0, 0
	for _, p := range tr.Paths {
		byComps[p.Comps]++
		if p.Flat {
			flat++
			flatCount += 1 << p.Ops()
		}
		if p.Comps == 0 {
			plain++
		}
		require.NoError(t, Validate(p), p.String())
		d := 0
		for _, s := range p.Steps {
			if s.Kind == Decomp {
				d++
			}
		}
		assert.Equal(t, p.Comps, d, "#Comp = #Decomp on %v", p)
	}
	assert.Equal(t, map[int]int{0: 9, 1: 59, 2: 72, 3: 30, 4: 4}, byComps)
	assert.Equal(t, 12, flat)
	assert.Equal(t, 9, plain)
	assert.Equal(t, 63, flatCount, "flat options with devices")
	assert.Equal(t, 4278, tr.Count()-flatCount, "hierarchical options with devices")
}

func TestTreeMaxComps(t *testing.T) {
	for c, want := range map[int]int{1: 9 + 59, 2: 9 + 59 + 72, 3: 174 - 4, 4: 174} {
		tr := NewTree(c)
		assert.Len(t, tr.Paths, want, "max %d comps", c)
		for _, p := range tr.Paths {
			assert.LessOrEqual(t, p.Comps, c)
		}
	}
}

func TestOptionRoundTrip(t *testing.T) {
	tr := NewTree(0)
	n := 0
	for i, p := range tr.Paths {
		for cpu := uint32(0); cpu < 1<<p.Ops(); cpu++ {
			o := Option{Path: i, CPU: cpu}
			s := tr.Format(o)
			back, err := tr.Parse(s)
			require.NoError(t, err, s)
			assert.Equal(t, o, back)
			n++
		}
	}
	assert.Equal(t, 4341, n)
	o, err := tr.Parse("I1:RS > C > X:AG* > D > I2:AG")
	require.NoError(t, err)
	assert.Equal(t, "I1:RS > C@gpu > X:AG* > D@gpu > I2:AG", tr.Format(o))
	for _, bad := range []string{"I1:RS > X:AG* > I2:AG", "F:AR@cpu", "C@tpu > F:AG* > D", "", "F1:RS > F2:BC"} {
		_, err := tr.Parse(bad)
		assert.Error(t, err, bad)
	}
}

// Crossed-out edges of Fig. 8 and broken pairings are rejected.
func TestValidateRejects(t *testing.T) {
	tr := NewTree(0)
	mk := func(s string) Path {
		var p Path
		for _, f := range strings.Split(s, " > ") {
			switch f {
			case "C":
				p.Steps = append(p.Steps, cStep)
			case "D":
				p.Steps = append(p.Steps, dStep)
			default:
				// reuse a parsed path's step with that text
				found := false
				for _, q := range tr.Paths {
					for _, st := range q.Steps {
						if st.String() == f && !found {
							p.Steps = append(p.Steps, st)
							found = true
						}
					}
				}
				require.True(t, found, f)
			}
		}
		return p
	}
	for _, s := range []string{
		"C > F2:AG* > D",                    // Comm2_comp as a first step
		"F1:RS > F2:BC",                     // RS pairs with AG
		"C > F1:A2A* > D > F2:BC",           // A2A pairs with AG
		"C > I1:A2A* > X:AR > D",            // allreduce on a compressed payload
		"F:AR > C",                          // ends compressed
		"C > C > F:AG* > D > D",             // compress twice
		"D > F:AR",                          // decompress a dense payload
		"I1:RS > X1:Reduce > X2:AG > I2:AG", // Reduce pairs with BC
	} {
		assert.Error(t, Validate(mk(s)), s)
	}
}

// Every path prices without error on any cluster shape and size: the
// payload descriptor ends dense with the whole tensor.
func TestCompileAllPaths(t *testing.T) {
	tr := NewTree(0)
	costs := codecCosts(t, "efsignsgd")
	for _, cl := range []costmodelCluster{{1, 1}, {1, 8}, {2, 4}, {8, 8}, {3, 5}} {
		c := nvlink(cl.n, cl.k)
		for _, d := range []int64{1, 7, 1000, 12345677} {
			for _, p := range tr.Paths {
				for _, cpu := range []uint32{0, 1<<p.Ops() - 1} {
					g, err := compile(c, costs, p, cpu, d, false)
					require.NoError(t, err, "%v on %dx%d, d=%d", p, cl.n, cl.k, d)
					for _, o := range g.ops {
						assert.GreaterOrEqual(t, o.dur, 0.0)
					}
				}
			}
		}
	}
	// the spec's §3.2 example through a whole path: FP32 hierarchical
	// allreduce of 2,359,296 elements on 8×8 NVLink, α = 0
	c := nvlink(8, 8)
	c.Intra.AlphaNS, c.Inter.AlphaNS = 0, 0
	o, _ := tr.Parse("I1:RS > X:AR > I2:AG")
	g, err := compile(c, costs, tr.Paths[o.Path], 0, 2359296, false)
	require.NoError(t, err)
	total := 0.0
	for _, op := range g.ops {
		total += op.dur
	}
	assert.InDelta(t, 1431.3, total/1e3, 0.05)
}

type costmodelCluster struct{ n, k int }

// FuzzParseOption: the option parser never panics, and what it accepts
// formats back to itself (with devices made explicit).
func FuzzParseOption(f *testing.F) {
	tr := NewTree(0)
	for _, s := range []string{"F:AR", "I1:RS > C@cpu > X:AG* > D@gpu > I2:AG", "C > F:AG* > D", "C@tpu", " > ", "X:AR@gpu"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := tr.Parse(s)
		if err != nil {
			return
		}
		back, err := tr.Parse(tr.Format(o))
		require.NoError(t, err)
		assert.Equal(t, o, back)
	})
}
