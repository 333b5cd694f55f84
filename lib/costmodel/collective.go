package costmodel

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// Collective names a collective routine.
type Collective uint8

// The collectives the planners price. Their byte argument S follows
// NCCL-tests' conventions (doc/PERFORMANCE.md): the buffer for Allreduce,
// Broadcast and Reduce; the whole array (every rank's share) for
// ReduceScatter and Allgather; each rank's send buffer for Alltoall; the
// total gathered at the root for Gather.
const (
	Allreduce Collective = iota
	ReduceScatter
	Allgather
	Broadcast
	Reduce
	Alltoall
	Gather
)

var collNames = [...]string{"allreduce", "reducescatter", "allgather", "broadcast", "reduce", "alltoall", "gather"}

// Short names, as Espresso's decision tree writes them (spec Appendix A).
var collShort = [...]string{"AR", "RS", "AG", "BC", "Reduce", "A2A", "GA"}

func (c Collective) String() string {
	if int(c) < len(collNames) {
		return collNames[c]
	}
	return fmt.Sprintf("collective(%d)", c)
}

// Short is the abbreviation used in option strings: AR, RS, AG, BC,
// Reduce, A2A, GA.
func (c Collective) Short() string {
	if int(c) < len(collShort) {
		return collShort[c]
	}
	return c.String()
}

// ParseCollective reads a collective's long or short name
// (case-insensitive).
func ParseCollective(s string) (Collective, error) {
	for i := range collNames {
		if strings.EqualFold(s, collNames[i]) || strings.EqualFold(s, collShort[i]) {
			return Collective(i), nil
		}
	}
	return 0, fmt.Errorf("costmodel: unknown collective %q", s)
}

// Factor is NCCL-tests' bus-bandwidth factor of c on p ranks: the bytes
// each rank sends, as a multiple of S, in a bandwidth-optimal
// implementation (ring or pipelined tree).
func (c Collective) Factor(p int) float64 {
	if p <= 1 {
		return 0
	}
	q := float64(p-1) / float64(p)
	switch c {
	case Allreduce:
		return 2 * q
	case Broadcast, Reduce:
		return 1
	}
	return q
}

// Link is a latency-bandwidth (α-β) channel: a transfer of b bytes takes
// AlphaNS + b/GBps nanoseconds (GB/s is bytes per nanosecond).
type Link struct {
	AlphaNS float64
	GBps    float64
}

// Time is the time to move b bytes, 0 for nothing.
func (l Link) Time(b float64) float64 {
	if b <= 0 {
		return 0
	}
	return l.AlphaNS + b/l.GBps
}

// Cluster describes the machines a job runs on: Nodes machines of
// GPUsPerNode GPUs, an intra-machine link per GPU (NVLink or PCIe), a NIC
// per machine, the host-device copy link per GPU, and the CPU workers one
// GPU's process can run compression on.
type Cluster struct {
	Nodes       int
	GPUsPerNode int
	// Intra is the per-GPU bandwidth and latency inside a machine.
	Intra Link
	// Inter is the per-machine NIC; collectives between machines start
	// with its latency.
	Inter Link
	// PCIe is the host-device copy link of one GPU (device to host and
	// host to device each have one such engine).
	PCIe Link
	// CPUWorkers is how many compression operations one GPU's process can
	// run on CPUs at once (≥ 1).
	CPUWorkers int
}

// ErrCluster is wrapped by every error about a cluster description.
var ErrCluster = errors.New("costmodel: cluster")

// Validate checks the description; PCIe is only required when needPCIe
// (a plan that may offload compression to CPUs). Bandwidths are required
// where a collective uses them: Inter when there is more than one machine,
// Intra when a machine has more than one GPU.
func (c Cluster) Validate(needPCIe bool) error {
	if c.Nodes < 1 || c.GPUsPerNode < 1 {
		return fmt.Errorf("%w: nodes %d and gpus_per_node %d must be at least 1", ErrCluster, c.Nodes, c.GPUsPerNode)
	}
	check := func(name string, l Link, need bool) error {
		if math.IsNaN(l.AlphaNS) || l.AlphaNS < 0 || math.IsInf(l.AlphaNS, 0) {
			return fmt.Errorf("%w: %s latency %g ns must be finite and non-negative", ErrCluster, name, l.AlphaNS)
		}
		if !need {
			return nil
		}
		if !(l.GBps > 0) || math.IsInf(l.GBps, 0) {
			return fmt.Errorf("%w: %s bandwidth is missing or not positive (got %g GB/s)", ErrCluster, name, l.GBps)
		}
		return nil
	}
	if err := check("inter-machine", c.Inter, c.Nodes > 1); err != nil {
		return err
	}
	if err := check("intra-machine", c.Intra, c.GPUsPerNode > 1); err != nil {
		return err
	}
	if err := check("pcie", c.PCIe, needPCIe); err != nil {
		return err
	}
	if needPCIe && c.CPUWorkers < 1 {
		return fmt.Errorf("%w: cpu_workers %d must be at least 1", ErrCluster, c.CPUWorkers)
	}
	return nil
}

// Ranks is Nodes·GPUsPerNode.
func (c Cluster) Ranks() int { return c.Nodes * c.GPUsPerNode }

// Group is who joins one collective: Local GPUs on each of Nodes machines
// (machine-contiguous ranks), and Streams such collectives running at once
// on different GPUs of each machine and sharing its NIC (the k parallel
// inter-machine collectives of hierarchical communication).
type Group struct {
	Nodes, Local, Streams int
}

// Flat is every GPU of the job in one collective.
func (c Cluster) Flat() Group { return Group{Nodes: c.Nodes, Local: c.GPUsPerNode, Streams: 1} }

// IntraGroup is the GPUs of one machine.
func (c Cluster) IntraGroup() Group { return Group{Nodes: 1, Local: c.GPUsPerNode, Streams: 1} }

// InterGroup is one GPU per machine, with streams such collectives sharing
// each NIC.
func (c Cluster) InterGroup(streams int) Group {
	return Group{Nodes: c.Nodes, Local: 1, Streams: max(streams, 1)}
}

// Time is the α-β time in nanoseconds of collective op over g with S bytes
// (NCCL-tests' S, see Collective). It is α plus the larger of the bytes
// each machine's NIC carries over Inter and the bytes each GPU's link
// carries over Intra:
//
//   - ring-like routines (Allreduce, ReduceScatter, Allgather, Broadcast,
//     Reduce): every rank sends Factor·S; with machine-contiguous rings
//     each NIC carries that much per stream, so a flat collective over
//     several machines is bound by the NIC (NCCL-tests' busbw);
//   - Alltoall: a rank sends S·(p−Local)/p off its machine, and the NIC
//     carries Local of those per stream; S·(Local−1)/p stays inside;
//   - Gather: the root's NIC receives S·(p−Local)/p per stream, its GPU
//     link S·(Local−1)/p.
//
// α is Intra's latency for a group inside one machine, else Inter's. A
// group of one rank, or nothing to send, costs 0.
func (c Cluster) Time(op Collective, g Group, s float64) float64 {
	p := g.Nodes * g.Local
	if p <= 1 || s <= 0 {
		return 0
	}
	streams := float64(max(g.Streams, 1))
	var nic, gpu float64
	fp, fl := float64(p), float64(g.Local)
	switch op {
	case Alltoall:
		nic = fl * s * (fp - fl) / fp * streams
		gpu = s * (fl - 1) / fp
	case Gather:
		nic = s * (fp - fl) / fp * streams
		gpu = s * (fl - 1) / fp
	default:
		t := op.Factor(p) * s
		gpu = t
		if g.Nodes > 1 {
			nic = t * streams
			if g.Local == 1 {
				gpu = 0
			}
		}
	}
	if g.Nodes == 1 {
		nic = 0
		if op == Alltoall || op == Gather {
			gpu = s * (fp - 1) / fp
		}
	}
	var t float64
	if gpu > 0 {
		t = gpu / c.Intra.GBps
	}
	if nic > 0 {
		t = math.Max(t, nic/c.Inter.GBps)
	}
	alpha := c.Inter.AlphaNS
	if g.Nodes == 1 {
		alpha = c.Intra.AlphaNS
	}
	return alpha + t
}

// Copy is the time of a host-device copy of b bytes over PCIe.
func (c Cluster) Copy(b float64) float64 { return c.PCIe.Time(b) }
