package espresso

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The timeline never starts a step before its input is ready: a
// gradient's first step starts no earlier than its backprop ends, each
// step no earlier than the previous one ends, and no resource serves two
// steps at once. Checked on random instances with random options drawn
// from all 4341.
func TestTimelineReadiness(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	tr := NewTree(0)
	for it := range 300 {
		cl := randomCluster(r)
		job := randomJob(r, 2+r.IntN(12))
		in, err := NewInstance(job, cl, codecCosts(t, []string{"topk", "efsignsgd", "randomk"}[it%3]), tr)
		require.NoError(t, err)
		s := make([]Option, in.N())
		for i := range s {
			p := r.IntN(len(tr.Paths))
			s[i] = Option{Path: p, CPU: uint32(r.IntN(1 << tr.Paths[p].Ops()))}
		}
		tl, err := in.Trace(s)
		require.NoError(t, err)
		f, err := in.F(s)
		require.NoError(t, err)
		assert.InDelta(t, f, tl.IterNS, 1e-6*f)
		type iv struct{ a, b float64 }
		busy := map[string][]iv{}
		prevReady := 0.0
		for i, g := range tl.Grads {
			assert.GreaterOrEqual(t, g.ReadyNS, job.Grads[i].ReadyNS-1e-6, "contention only delays backprop")
			assert.GreaterOrEqual(t, g.ReadyNS, prevReady, "ready in backprop order")
			prevReady = g.ReadyNS
			assert.GreaterOrEqual(t, g.StartNS, g.ReadyNS, "gradient %d starts before it is ready", i)
			prev := g.ReadyNS
			for _, st := range g.Steps {
				assert.GreaterOrEqual(t, st.StartNS, prev, "gradient %d step %s starts before its input", i, st.Step)
				prev = st.EndNS
				if st.Resource != "cpu" {
					for _, res := range splitPlus(st.Resource) {
						busy[res] = append(busy[res], iv{st.StartNS, st.EndNS})
					}
				}
			}
			assert.InDelta(t, prev, g.EndNS, 1e-6)
			assert.LessOrEqual(t, g.EndNS, tl.SyncEnd+1e-6)
		}
		for res, ivs := range busy {
			sort.Slice(ivs, func(a, b int) bool { return ivs[a].a < ivs[b].a })
			for k := 1; k < len(ivs); k++ {
				assert.GreaterOrEqual(t, ivs[k].a, ivs[k-1].b-1e-6, "%s serves two steps at once", res)
			}
		}
	}
}

func splitPlus(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '+' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// Without compression the timeline reproduces the measured ready times;
// a GPU compression delays the backprop of later gradients, a CPU one
// does not (§7b.2).
func TestTimelineContention(t *testing.T) {
	job := Job{ForwardNS: 1e6, Grads: []Grad{
		{Name: "a", Numel: 4 << 20, ReadyNS: 1e6, ComputeNS: 1e6},
		{Name: "b", Numel: 1 << 20, ReadyNS: 3e6, ComputeNS: 2e6},
		{Name: "c", Numel: 1 << 20, ReadyNS: 5e6, ComputeNS: 2e6},
	}}
	tr := NewTree(0)
	in, err := NewInstance(job, nvlink(4, 8), codecCosts(t, "topk"), tr)
	require.NoError(t, err)
	fp32, err := tr.Parse("I1:RS > X:AR > I2:AG")
	require.NoError(t, err)
	tl, err := in.Trace(Uniform(3, fp32))
	require.NoError(t, err)
	for i, g := range tl.Grads {
		assert.Equal(t, job.Grads[i].ReadyNS, g.ReadyNS)
	}
	assert.GreaterOrEqual(t, tl.IterNS, job.ForwardNS+5e6, "F(uncompressed) >= forward + backprop")

	gpu, err := tr.Parse("I1:RS > C@gpu > X:AG* > D@gpu > I2:AG")
	require.NoError(t, err)
	cpu, err := tr.Parse("I1:RS > C@cpu > X:AG* > D@cpu > I2:AG")
	require.NoError(t, err)
	tl, err = in.Trace([]Option{gpu, fp32, fp32})
	require.NoError(t, err)
	assert.Greater(t, tl.Grads[1].ReadyNS, job.Grads[1].ReadyNS, "a GPU compression delays the next kernel")
	tl, err = in.Trace([]Option{cpu, fp32, fp32})
	require.NoError(t, err)
	assert.Equal(t, job.Grads[1].ReadyNS, tl.Grads[1].ReadyNS, "a CPU compression does not")
	assert.Contains(t, tl.Grads[0].Steps[1].Step, "D2H")
}

// Free compression never makes F larger; more bandwidth never makes an
// uncompressed or CPU-compressed plan slower (those timelines are
// max-plus, so monotone); Upper Bound <= F.
func TestTimelineMonotone(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	tr := NewTree(0)
	for range 200 {
		cl := randomCluster(r)
		job := randomJob(r, 2+r.IntN(8))
		costs := codecCosts(t, "topk")
		in, err := NewInstance(job, cl, costs, tr)
		require.NoError(t, err)
		s := make([]Option, in.N())
		for i := range s {
			p := r.IntN(len(tr.Paths))
			s[i] = Option{Path: p, CPU: 1<<tr.Paths[p].Ops() - 1}
		}
		f, err := in.F(s)
		require.NoError(t, err)
		free, err := in.FreeCompression(s)
		require.NoError(t, err)
		assert.LessOrEqual(t, free, f*(1+1e-12))
		fast := cl
		fast.Inter.GBps *= 2
		fast.Intra.GBps *= 1.5
		in2, err := NewInstance(job, fast, costs, tr)
		require.NoError(t, err)
		f2, err := in2.F(s)
		require.NoError(t, err)
		assert.LessOrEqual(t, f2, f*(1+1e-12))
		assert.False(t, math.IsNaN(f))
	}
}

func TestInstanceErrors(t *testing.T) {
	tr := NewTree(0)
	good := Job{Grads: []Grad{{Name: "a", Numel: 10, ReadyNS: 5}, {Name: "b", Numel: 10, ReadyNS: 7}}}
	_, err := NewInstance(good, nvlink(2, 2), codecCosts(t, "topk"), tr)
	require.NoError(t, err)
	bad := Job{Grads: []Grad{{Name: "a", Numel: 10, ReadyNS: 9}, {Name: "b", Numel: 10, ReadyNS: 7}}}
	_, err = NewInstance(bad, nvlink(2, 2), codecCosts(t, "topk"), tr)
	assert.ErrorContains(t, err, "gradients out of order: gradient 1 (b)")
	cl := nvlink(2, 2)
	cl.Inter.GBps = 0
	_, err = NewInstance(good, cl, codecCosts(t, "topk"), tr)
	assert.ErrorContains(t, err, "inter-machine bandwidth is missing")
	_, err = NewInstance(Job{}, nvlink(2, 2), codecCosts(t, "topk"), tr)
	assert.ErrorContains(t, err, "no gradients")
	_, err = NewInstance(Job{Grads: []Grad{{Name: "z", Numel: 0}}}, nvlink(2, 2), codecCosts(t, "topk"), tr)
	assert.ErrorContains(t, err, "numel 0")
	c := codecCosts(t, "topk")
	c.GPU, c.CPU = nil, nil
	_, err = NewInstance(good, nvlink(2, 2), c, tr)
	assert.ErrorContains(t, err, "no compression time model")
	// a GPU-only profile makes CPU options unavailable, not wrong
	c = codecCosts(t, "topk")
	c.CPU = nil
	in, err := NewInstance(good, nvlink(2, 2), c, tr)
	require.NoError(t, err)
	o, _ := tr.Parse("C@cpu > F:AG* > D@cpu")
	assert.False(t, in.Available(0, o))
	_, err = in.F(Uniform(2, o))
	assert.ErrorContains(t, err, "no time model")
}
