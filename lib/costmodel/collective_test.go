package costmodel

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The worked example of spec §3.2 (α = 0, d = 2,359,296, k = N = 8).
func TestCollectiveGoldens(t *testing.T) {
	const m = 9437184.0 // 4·2,359,296 bytes
	us := func(ns float64) float64 { return math.Round(ns/10) / 100 }
	nv := Cluster{Nodes: 8, GPUsPerNode: 8, Intra: Link{GBps: 150}, Inter: Link{GBps: 12.5}}
	k, n := 8, 8
	rs := nv.Time(ReduceScatter, nv.IntraGroup(), m)
	assert.Equal(t, 55.05, us(rs), "I1 RS")
	assert.Equal(t, 55.05, us(nv.Time(Allgather, nv.IntraGroup(), m)), "I2 AG")
	ar := nv.Time(Allreduce, nv.InterGroup(k), m/float64(k))
	assert.Equal(t, 1321.21, us(ar), "X AR")
	assert.InDelta(t, 1431.3, (2*rs+ar)/1e3, 0.05, "FP32 hierarchical")
	for _, c := range []struct {
		r       float64
		ag, a2a float64
	}{{0.02, 105.7, 26.4}, {1.0 / 32, 165.2, 41.3}} {
		piece := c.r * m / float64(k) // each GPU's compressed chunk
		ag := nv.Time(Allgather, nv.InterGroup(k), float64(n)*piece)
		assert.InDelta(t, c.ag, ag/1e3, 0.05, "X AG* r=%g", c.r)
		a2a := nv.Time(Alltoall, nv.InterGroup(k), piece) + nv.Time(Allgather, nv.InterGroup(k), piece)
		assert.InDelta(t, c.a2a, a2a/1e3, 0.05, "X A2A*+AG* r=%g", c.r)
	}
	pc := Cluster{Nodes: 8, GPUsPerNode: 8, Intra: Link{GBps: 12.5}, Inter: Link{GBps: 3.125}}
	assert.InDelta(t, 660.6, pc.Time(ReduceScatter, pc.IntraGroup(), m)/1e3, 0.05)
	assert.InDelta(t, 5284.8, pc.Time(Allreduce, pc.InterGroup(k), m/8)/1e3, 0.05)
	assert.InDelta(t, 422.8, pc.Time(Allgather, pc.InterGroup(k), 8*0.02*m/8)/1e3, 0.05)
	assert.InDelta(t, 105.7, (pc.Time(Alltoall, pc.InterGroup(k), 0.02*m/8)+pc.Time(Allgather, pc.InterGroup(k), 0.02*m/8))/1e3, 0.05)
	assert.InDelta(t, 13.21, pc.Time(Alltoall, pc.IntraGroup(), 0.02*m)/1e3, 0.005)
	// Gather: the root receives (k−1) pieces of rM inside a machine.
	assert.InDelta(t, 7*0.02*m/150/1e3, nv.Time(Gather, nv.IntraGroup(), 8*0.02*m)/1e3, 1e-9)
	// X Gather* over N machines, k streams: (N−1)·rM over the NIC.
	assert.InDelta(t, 7*0.02*m/12.5, nv.Time(Gather, nv.InterGroup(k), 8*0.02*m/8), 1e-6)
	// Flat allreduce is bound by the NIC: 2(p−1)/p·M/B_inter.
	assert.InDelta(t, 2*63.0/64*m/12.5, nv.Time(Allreduce, nv.Flat(), m), 1e-6)
}

func TestCollectiveEdges(t *testing.T) {
	c := Cluster{Nodes: 1, GPUsPerNode: 1, Intra: Link{AlphaNS: 5, GBps: 1}, Inter: Link{AlphaNS: 7, GBps: 1}}
	assert.Zero(t, c.Time(Allreduce, c.Flat(), 1e6), "one rank: nothing to do")
	c.GPUsPerNode = 4
	assert.Zero(t, c.Time(Allreduce, c.IntraGroup(), 0), "nothing to send")
	assert.Equal(t, 5+1.5e6, c.Time(Allreduce, c.IntraGroup(), 1e6), "α_intra inside a machine")
	c.Nodes = 2
	assert.Equal(t, 7+1e6, c.Time(Broadcast, c.InterGroup(2), 5e5), "two streams share the NIC")
	for op := Allreduce; op <= Gather; op++ {
		back, err := ParseCollective(op.Short())
		require.NoError(t, err)
		assert.Equal(t, op, back)
		back, err = ParseCollective(op.String())
		require.NoError(t, err)
		assert.Equal(t, op, back)
		// more bytes never take less time; more bandwidth never more
		for _, g := range []Group{c.Flat(), c.IntraGroup(), c.InterGroup(4)} {
			a, b := c.Time(op, g, 1e6), c.Time(op, g, 2e6)
			assert.LessOrEqual(t, a, b)
			fast := c
			fast.Inter.GBps, fast.Intra.GBps = 2, 2
			assert.LessOrEqual(t, fast.Time(op, g, 1e6), a)
		}
	}
	_, err := ParseCollective("allsum")
	assert.Error(t, err)
}

func TestClusterValidate(t *testing.T) {
	ok := Cluster{Nodes: 2, GPUsPerNode: 4, Intra: Link{GBps: 100}, Inter: Link{GBps: 10}, PCIe: Link{GBps: 12}, CPUWorkers: 1}
	require.NoError(t, ok.Validate(true))
	bad := ok
	bad.Inter.GBps = 0
	assert.ErrorContains(t, bad.Validate(false), "inter-machine bandwidth is missing")
	bad = ok
	bad.Nodes = 1
	bad.Inter.GBps = 0
	assert.NoError(t, bad.Validate(false), "one machine needs no NIC")
	bad = ok
	bad.PCIe.GBps = 0
	assert.NoError(t, bad.Validate(false))
	assert.ErrorContains(t, bad.Validate(true), "pcie bandwidth")
	bad = ok
	bad.Intra.AlphaNS = math.NaN()
	assert.Error(t, bad.Validate(false))
	bad = ok
	bad.GPUsPerNode = 0
	assert.ErrorIs(t, bad.Validate(false), ErrCluster)
	assert.Equal(t, 8, ok.Ranks())
	assert.InDelta(t, 5+1e6/12, Cluster{PCIe: Link{AlphaNS: 5, GBps: 12}}.Copy(1e6), 1e-9)
}

func TestFitCodec(t *testing.T) {
	var s []CodecSample
	for _, b := range []float64{1 << 16, 1 << 20, 1 << 24, 1 << 26} {
		s = append(s, CodecSample{Bytes: b, EncodeNS: 2000 + b/2, DecodeNS: 500 + b/8})
	}
	ct, e, err := FitCodec(s)
	require.NoError(t, err)
	assert.Less(t, e, 1e-6)
	assert.InDelta(t, 2000+float64(1<<22)/2, ct.EncodeNS(1<<22), 1e-3)
	assert.InDelta(t, 500+float64(1<<22)/8, ct.DecodeNS(1<<22), 1e-3)
	neg := CodecTimes{Encode: Linear{Alpha: -10, Beta: 1}, Decode: Linear{Alpha: -10, Beta: 1}}
	assert.Zero(t, neg.EncodeNS(1))
	assert.Zero(t, neg.DecodeNS(1))
	_, _, err = FitCodec(nil)
	assert.ErrorIs(t, err, ErrSamples)
}
