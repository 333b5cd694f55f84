package espresso

import (
	"errors"
	"fmt"
	"math"

	"trainwire.dev/lib/costmodel"
)

// Resources of the timeline, as bits of a mask: a step holds every
// resource of its mask from its start to its end.
const (
	resGPU   = iota // the GPU's compression stream (also stretches backprop)
	resIntra        // the GPU's intra-machine link
	resInter        // the machine's NIC
	resD2H          // device-to-host copy engine
	resH2D          // host-to-device copy engine
	resCPU          // the CPU workers (a pool, handled apart)
	nRes
)

var resNames = [nRes]string{"gpu", "intra", "inter", "d2h", "h2d", "cpu"}

// op is one timed step of a compiled option.
type op struct {
	mask uint8
	// step is the index of the option's step this op belongs to, or -1 for
	// a host-device copy the option implies.
	step int8
	dur  float64
}

// prog is an option compiled for one tensor size: its ops and the time it
// spends on each resource (for the planner's lower bounds).
type prog struct {
	ops   []op
	usage [nRes]float64
}

// Costs is what pricing an option needs besides the cluster: the codec's
// compressed size and its time on each device. GPU or CPU may be nil when
// the codec has no model on that device; options using it are then not
// available.
type Costs struct {
	// Size is the compressed bytes of n f32 elements.
	Size func(n int64) int64
	GPU  *costmodel.CodecTimes
	CPU  *costmodel.CodecTimes
}

// errUnavailable marks an option whose device has no time model.
var errUnavailable = errors.New("device has no time model")

// compile prices path p with device mask cpu for a gradient of d elements,
// by carrying a payload descriptor through the path (spec §3.2): dense or
// compressed; the elements a piece stands for; how many pieces of the same
// chunk (from different ranks) and how many distinct chunks a GPU holds; h, the GPUs per machine that hold
// data (k after a reduce-scatter or alltoall, 1 after a reduce or gather),
// which is how many inter-machine collectives share the NIC. zeroComp
// prices compression and decompression at 0 (the Upper Bound of §5.4).
func compile(cl costmodel.Cluster, c Costs, p Path, cpu uint32, d int64, zeroComp bool) (prog, error) {
	cp := &compiler{cl: cl, c: c, cpu: cpu, zeroComp: zeroComp, dense: true, e: float64(d), a: 1, cc: 1, h: cl.GPUsPerNode}
	if cl.Nodes > 1 {
		cp.flatMask |= 1 << resInter
	}
	if cl.GPUsPerNode > 1 {
		cp.flatMask |= 1 << resIntra
	}
	for i, s := range p.Steps {
		var err error
		switch s.Kind {
		case Comm:
			err = cp.comm(i, s)
		case Comp, Decomp:
			err = cp.codec(i, s)
		}
		if err != nil {
			return cp.g, err
		}
	}
	cp.toDevice()
	if !cp.dense || math.Abs(cp.e-float64(d)) > 1e-6*float64(d) {
		return cp.g, fmt.Errorf("path %v ends with %v elements (dense %v), want %d dense", p, cp.e, cp.dense, d)
	}
	return cp.g, nil
}

// compiler carries compile's payload descriptor through a path and
// collects the program's ops.
type compiler struct {
	cl       costmodel.Cluster
	c        Costs
	cpu      uint32 // device mask: bit j set puts the j-th codec step on the CPU
	zeroComp bool
	flatMask uint8
	g        prog
	// dense or compressed; e: elements one piece (or the dense chunk)
	// stands for; a: pieces of the same chunk from different ranks (to
	// be summed); cc: distinct chunks held (to be concatenated); h: GPUs
	// per machine holding data; onCPU: where the payload is; dev: codec
	// steps seen.
	dense    bool
	e, a, cc float64
	h        int
	onCPU    bool
	dev      int
}

// sz is the compressed size of a piece standing for e elements.
func (cp *compiler) sz(e float64) float64 {
	return float64(cp.c.Size(int64(math.Ceil(e - 1e-9))))
}

// bytes is the payload's size now.
func (cp *compiler) bytes() float64 {
	if cp.dense {
		return 4 * cp.e
	}
	return cp.a * cp.cc * cp.sz(cp.e)
}

// add appends an op on the resources of mask (none when it takes no time:
// a group of one rank, or free compression — nothing waits).
func (cp *compiler) add(mask uint8, step int, dur float64) {
	if dur <= 0 {
		return
	}
	cp.g.ops = append(cp.g.ops, op{mask: mask, step: int8(step), dur: dur})
	for r := range nRes {
		if mask&(1<<r) != 0 {
			cp.g.usage[r] += dur
		}
	}
}

func (cp *compiler) toDevice() {
	if cp.onCPU {
		cp.add(1<<resH2D, -1, cp.cl.Copy(cp.bytes()))
		cp.onCPU = false
	}
}

func (cp *compiler) toHost() {
	if !cp.onCPU {
		cp.add(1<<resD2H, -1, cp.cl.Copy(cp.bytes()))
		cp.onCPU = true
	}
}

// comm prices communication step i: its group and resources by phase, the
// bytes it sends by operation and payload, and what the payload becomes.
func (cp *compiler) comm(i int, s Step) error {
	cp.toDevice()
	var grp costmodel.Group
	var mask uint8
	switch s.Phase {
	case F, F1, F2:
		grp, mask = cp.cl.Flat(), cp.flatMask
	case I1, I2:
		grp, mask = cp.cl.IntraGroup(), 1<<resIntra
	default:
		grp, mask = cp.cl.InterGroup(cp.h), 1<<resInter
	}
	n := float64(grp.Nodes * grp.Local)
	second := s.Phase == F2 || s.Phase == I2 || s.Phase == X2
	var sb float64
	switch {
	case cp.dense && (s.Op == costmodel.Allreduce || s.Op == costmodel.Reduce || s.Op == costmodel.Broadcast):
		sb = 4 * cp.e
	case cp.dense && s.Op == costmodel.ReduceScatter:
		sb = 4 * cp.e
		cp.e /= n
	case cp.dense && s.Op == costmodel.Allgather:
		sb = 4 * cp.e * n
		cp.e *= n
	case !cp.dense && s.Op == costmodel.Allgather:
		// step 2 gathers different chunks; the indivisible allgather
		// gathers every rank's copy of the same one
		sb = n * cp.a * cp.cc * cp.sz(cp.e)
		if second {
			cp.cc *= n
		} else {
			cp.a *= n
		}
	case !cp.dense && s.Op == costmodel.Gather:
		sb = n * cp.a * cp.cc * cp.sz(cp.e)
		cp.a *= n
	case !cp.dense && s.Op == costmodel.Alltoall:
		// every piece is split in n; rank j gets part j of all
		sb = cp.a * cp.cc * n * cp.sz(cp.e/n)
		cp.a *= n
		cp.e /= n
	case !cp.dense && s.Op == costmodel.Broadcast:
		sb = cp.a * cp.cc * cp.sz(cp.e)
	default:
		return fmt.Errorf("%v on a %s payload", s, map[bool]string{true: "dense", false: "compressed"}[cp.dense])
	}
	if s.Phase == I1 && (s.Op == costmodel.Reduce || s.Op == costmodel.Gather) {
		cp.h = 1
	}
	if s.Phase == I2 {
		cp.h = cp.cl.GPUsPerNode
	}
	cp.add(mask, i, cp.cl.Time(s.Op, grp, sb))
	return nil
}

// codec prices compression or decompression step i on its device (the
// mask's next bit), moving the payload there first.
func (cp *compiler) codec(i int, s Step) error {
	onDev := cp.cpu&(1<<cp.dev) != 0
	cp.dev++
	times := cp.c.GPU
	if onDev {
		times = cp.c.CPU
	}
	if times == nil {
		return errUnavailable
	}
	var dur float64
	if s.Kind == Comp {
		if !cp.dense {
			return fmt.Errorf("step %d: compression of a compressed payload", i)
		}
		dur = times.EncodeNS(4 * cp.e)
	} else {
		if cp.dense {
			return fmt.Errorf("step %d: decompression of a dense payload", i)
		}
		dur = cp.a * cp.cc * times.DecodeNS(4*cp.e)
	}
	if cp.zeroComp {
		dur = 0
	}
	if onDev {
		cp.toHost()
		cp.add(1<<resCPU, i, dur)
	} else {
		cp.toDevice()
		cp.add(1<<resGPU, i, dur)
	}
	if s.Kind == Decomp {
		cp.e *= cp.cc
	}
	cp.dense, cp.a, cp.cc = s.Kind == Decomp, 1, 1
	return nil
}
