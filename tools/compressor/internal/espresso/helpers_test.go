package espresso

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/costmodel"
)

// codecCosts are plausible codec models: GPU kernels with a launch cost,
// CPU code at a few GB/s, sizes from the real codec.
func codecCosts(t testing.TB, algo string) Costs {
	c, err := codec.New(algo, codec.Options{Ratio: 0.01})
	require.NoError(t, err)
	return Costs{
		Size: func(n int64) int64 { return c.Size([]int64{n}) },
		GPU: &costmodel.CodecTimes{Encode: costmodel.Piecewise{Alpha: 60e3, Beta: 1.0 / 150, Threshold: 4 << 20},
			Decode: costmodel.Piecewise{Alpha: 25e3, Beta: 1.0 / 300, Threshold: 4 << 20}},
		CPU: &costmodel.CodecTimes{Encode: costmodel.Linear{Alpha: 15e3, Beta: 1.0 / 2.5},
			Decode: costmodel.Linear{Alpha: 5e3, Beta: 1.0 / 6}},
	}
}

func nvlink(nodes, k int) costmodel.Cluster {
	return costmodel.Cluster{Nodes: nodes, GPUsPerNode: k, Intra: costmodel.Link{AlphaNS: 8e3, GBps: 150},
		Inter: costmodel.Link{AlphaNS: 25e3, GBps: 12.5}, PCIe: costmodel.Link{AlphaNS: 8e3, GBps: 12.5}, CPUWorkers: 1}
}

// randomCluster draws from the spec's grid (§7b.5): k ∈ {1,4,8}, N ∈
// {2,4,8}, NVLink or PCIe inside, 25 or 100 Gbit/s between machines.
func randomCluster(r *rand.Rand) costmodel.Cluster {
	cl := nvlink([]int{2, 4, 8}[r.IntN(3)], []int{1, 4, 8}[r.IntN(3)])
	if r.IntN(2) == 0 {
		cl.Intra.GBps = 12.5
	}
	if r.IntN(2) == 0 {
		cl.Inter.GBps = 3.125
	}
	cl.CPUWorkers = 1 + r.IntN(2)
	return cl
}

// randomJob has n gradients of 1 KB–100 MB (log-uniform) with backprop
// gaps of 0.1–5 ms.
func randomJob(r *rand.Rand, n int) Job {
	j := Job{Name: "random", ForwardNS: 1e6 + 4e6*r.Float64()}
	ready := 0.0
	for i := range n {
		b := math.Exp(math.Log(1e3) + r.Float64()*(math.Log(1e8)-math.Log(1e3)))
		gap := 1e5 + r.Float64()*4.9e6
		ready += gap
		j.Grads = append(j.Grads, Grad{Name: fmt.Sprintf("g%d", i), Numel: max(1, int64(b/4)), ReadyNS: ready, ComputeNS: gap})
	}
	return j
}

// smallPaths is the restricted option set of §7b.5.
var smallPaths = []string{
	"F:AR",
	"I1:RS > X:AR > I2:AG",
	"C > F:AG* > D",
	"I1:RS > C > X:AG* > D > I2:AG",
	"I1:RS > C > X1:A2A* > D > C > X2:AG* > D > I2:AG",
	"C > I1:A2A* > D > C > X:AG* > I2:AG* > D",
}

// allowedAll lists every option of the instance's tree with its
// compression all on the GPU or all on the CPU (what Algorithms 1 and 2
// can reach).
func allowedAll(in *Instance) [][]Option {
	out := make([][]Option, in.N())
	for i := range out {
		for p := range in.Tree.Paths {
			o := Option{Path: p}
			if in.Available(i, o) {
				out[i] = append(out[i], o)
			}
			if in.Tree.Paths[p].Comps > 0 {
				if c := in.cpuOf(o); in.Available(i, c) {
					out[i] = append(out[i], c)
				}
			}
		}
	}
	return out
}
