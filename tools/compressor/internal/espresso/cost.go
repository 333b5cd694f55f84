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
	var g prog
	k, nodes := cl.GPUsPerNode, cl.Nodes
	flatMask := uint8(0)
	if nodes > 1 {
		flatMask |= 1 << resInter
	}
	if k > 1 {
		flatMask |= 1 << resIntra
	}
	// e: elements one piece (or the dense chunk) stands for; a: pieces of
	// the same chunk from different ranks (to be summed); c: distinct
	// chunks held (to be concatenated).
	dense, e, a, cc, h, onCPU := true, float64(d), 1.0, 1.0, k, false
	sz := func(e float64) float64 { return float64(c.Size(int64(math.Ceil(e - 1e-9)))) }
	bytes := func() float64 {
		if dense {
			return 4 * e
		}
		return a * cc * sz(e)
	}
	add := func(mask uint8, step int, dur float64) {
		if dur <= 0 {
			return // a group of one rank, or free compression: nothing waits
		}
		g.ops = append(g.ops, op{mask: mask, step: int8(step), dur: dur})
		for r := range nRes {
			if mask&(1<<r) != 0 {
				g.usage[r] += dur
			}
		}
	}
	toDevice := func() {
		if onCPU {
			add(1<<resH2D, -1, cl.Copy(bytes()))
			onCPU = false
		}
	}
	toHost := func() {
		if !onCPU {
			add(1<<resD2H, -1, cl.Copy(bytes()))
			onCPU = true
		}
	}
	dev := 0
	for i, s := range p.Steps {
		switch s.Kind {
		case Comm:
			toDevice()
			var grp costmodel.Group
			var mask uint8
			switch s.Phase {
			case F, F1, F2:
				grp, mask = cl.Flat(), flatMask
			case I1, I2:
				grp, mask = cl.IntraGroup(), 1<<resIntra
			default:
				grp, mask = cl.InterGroup(h), 1<<resInter
			}
			n := float64(grp.Nodes * grp.Local)
			second := s.Phase == F2 || s.Phase == I2 || s.Phase == X2
			var sb float64
			switch {
			case dense && (s.Op == costmodel.Allreduce || s.Op == costmodel.Reduce || s.Op == costmodel.Broadcast):
				sb = 4 * e
			case dense && s.Op == costmodel.ReduceScatter:
				sb = 4 * e
				e /= n
			case dense && s.Op == costmodel.Allgather:
				sb = 4 * e * n
				e *= n
			case !dense && s.Op == costmodel.Allgather:
				// step 2 gathers different chunks; the indivisible
				// allgather gathers every rank's copy of the same one
				sb = n * a * cc * sz(e)
				if second {
					cc *= n
				} else {
					a *= n
				}
			case !dense && s.Op == costmodel.Gather:
				sb = n * a * cc * sz(e)
				a *= n
			case !dense && s.Op == costmodel.Alltoall:
				// every piece is split in n; rank j gets part j of all
				sb = a * cc * n * sz(e/n)
				a *= n
				e /= n
			case !dense && s.Op == costmodel.Broadcast:
				sb = a * cc * sz(e)
			default:
				return g, fmt.Errorf("%v on a %s payload", s, map[bool]string{true: "dense", false: "compressed"}[dense])
			}
			if s.Phase == I1 && (s.Op == costmodel.Reduce || s.Op == costmodel.Gather) {
				h = 1
			}
			if s.Phase == I2 {
				h = k
			}
			add(mask, i, cl.Time(s.Op, grp, sb))
		case Comp, Decomp:
			onDev := cpu&(1<<dev) != 0
			dev++
			times := c.GPU
			if onDev {
				times = c.CPU
			}
			if times == nil {
				return g, errUnavailable
			}
			var dur float64
			if s.Kind == Comp {
				if !dense {
					return g, fmt.Errorf("step %d: compression of a compressed payload", i)
				}
				dur = times.EncodeNS(4 * e)
			} else {
				if dense {
					return g, fmt.Errorf("step %d: decompression of a dense payload", i)
				}
				dur = a * cc * times.DecodeNS(4*e)
			}
			if zeroComp {
				dur = 0
			}
			if onDev {
				toHost()
				add(1<<resCPU, i, dur)
			} else {
				toDevice()
				add(1<<resGPU, i, dur)
			}
			if s.Kind == Decomp {
				e *= cc
			}
			dense, a, cc = s.Kind == Decomp, 1, 1
		}
	}
	toDevice()
	if !dense || math.Abs(e-float64(d)) > 1e-6*float64(d) {
		return g, fmt.Errorf("path %v ends with %v elements (dense %v), want %d dense", p, e, dense, d)
	}
	return g, nil
}
