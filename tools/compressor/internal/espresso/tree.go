// Package espresso is Espresso's compression-strategy planner (Wang et al.,
// EuroSys'23; spec seed-espresso.md §2–§4): the decision tree of
// compression options, the timeline F(S) that predicts an iteration's time
// under a strategy, Algorithm 1 (GPU compression: elimination and
// prioritization), Algorithm 2 (CPU offloading), the baselines, and an
// exhaustive search for small instances.
//
// Gradients are always indexed in backprop-ready order (0 = ready first).
// "Closer to the output layer" in the paper means ready later in backprop
// (spec §0.1): every ordering rule here is written in ready indices.
package espresso

import (
	"fmt"
	"strings"

	"trainwire.dev/lib/costmodel"
)

// Phase is where a communication step sits in an option.
type Phase uint8

// Phases: flat indivisible (F), flat divisible steps (F1, F2), the intra-
// machine steps of hierarchical communication (I1, I2), its inter-machine
// phase, indivisible (X) or divisible (X1, X2).
const (
	F Phase = iota
	F1
	F2
	I1
	I2
	X
	X1
	X2
)

var phaseNames = [...]string{"F", "F1", "F2", "I1", "I2", "X", "X1", "X2"}

func (p Phase) String() string { return phaseNames[p] }

// Kind is what a step does.
type Kind uint8

// Step kinds.
const (
	Comm Kind = iota
	Comp
	Decomp
)

// Step is one step of an option: a collective in a phase (on compressed
// payloads when Compressed), or a compression or decompression.
type Step struct {
	Kind       Kind
	Phase      Phase
	Op         costmodel.Collective
	Compressed bool
}

func (s Step) String() string {
	switch s.Kind {
	case Comp:
		return "C"
	case Decomp:
		return "D"
	}
	star := ""
	if s.Compressed {
		star = "*"
	}
	return s.Phase.String() + ":" + s.Op.Short() + star
}

// Path is a device-agnostic option: one path from Start to End of the
// decision tree (Fig. 8).
type Path struct {
	Steps []Step
	// Comps is the number of Comp steps (equal to the Decomp steps).
	Comps int
	// Flat is true for single-phase communication.
	Flat bool
}

// Ops is the number of Comp and Decomp steps: the path has 2^Ops device
// variants.
func (p Path) Ops() int { return 2 * p.Comps }

// String is the path in the spec's notation, e.g.
// "I1:RS > C > X:AG* > D > I2:AG".
func (p Path) String() string { return p.Format(0, false) }

// Format writes the path with devices: bit i of cpu set means the i-th
// Comp/Decomp step runs on the CPU ("C@cpu"), else on the GPU ("C@gpu").
// Without devices it writes plain "C" and "D".
func (p Path) Format(cpu uint32, devices bool) string {
	var b strings.Builder
	op := 0
	for i, s := range p.Steps {
		if i > 0 {
			b.WriteString(" > ")
		}
		b.WriteString(s.String())
		if s.Kind != Comm && devices {
			if cpu&(1<<op) != 0 {
				b.WriteString("@cpu")
			} else {
				b.WriteString("@gpu")
			}
		}
		if s.Kind != Comm {
			op++
		}
	}
	return b.String()
}

// The divisible routine pairs: step 1 fixes step 2 (pruning rule 3).
type pair struct{ one, two costmodel.Collective }

var (
	utPairs = []pair{{costmodel.ReduceScatter, costmodel.Allgather}, {costmodel.Reduce, costmodel.Broadcast}}
	ctPairs = []pair{{costmodel.Alltoall, costmodel.Allgather}, {costmodel.Gather, costmodel.Broadcast}}
)

var (
	cStep = Step{Kind: Comp}
	dStep = Step{Kind: Decomp}
)

func comm(ph Phase, op costmodel.Collective, compressed bool) Step {
	return Step{Kind: Comm, Phase: ph, Op: op, Compressed: compressed}
}

type seq = []Step

func cat(parts ...seq) seq {
	var out seq
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func prefix(pre seq, tails []seq) []seq {
	out := make([]seq, len(tails))
	for i, t := range tails {
		out[i] = cat(pre, t)
	}
	return out
}

// The sub-trees of §2.3. t1: second step on an uncompressed input; t2: on
// a compressed input; t5: second inter step and second intra step on an
// uncompressed input; t3: the inter phase and the second intra step,
// uncompressed input; t4: the same, compressed input.
func t1(ph Phase, op2 costmodel.Collective) []seq {
	return []seq{{comm(ph, op2, false)}, {cStep, comm(ph, op2, true), dStep}}
}

func t2(ph Phase, op2 costmodel.Collective) []seq {
	return append([]seq{{comm(ph, op2, true), dStep}}, prefix(seq{dStep}, t1(ph, op2))...)
}

func t5(op2x, op2i costmodel.Collective) []seq {
	return append(prefix(seq{comm(X2, op2x, false)}, t1(I2, op2i)),
		prefix(seq{cStep, comm(X2, op2x, true)}, t2(I2, op2i))...)
}

func t3(op2i costmodel.Collective) []seq {
	out := prefix(seq{comm(X, costmodel.Allreduce, false)}, t1(I2, op2i))
	for _, p := range utPairs {
		out = append(out, prefix(seq{comm(X1, p.one, false)}, t5(p.two, op2i))...)
	}
	return out
}

func t4(op2i costmodel.Collective) []seq {
	out := prefix(seq{comm(X, costmodel.Allgather, true)}, t2(I2, op2i))
	for _, p := range ctPairs {
		out = append(out, prefix(seq{comm(X1, p.one, true), comm(X2, p.two, true)}, t2(I2, op2i))...)
		out = append(out, prefix(seq{comm(X1, p.one, true), dStep}, t5(p.two, op2i))...)
	}
	return out
}

// enumerate walks the whole tree in the order of the spec's Appendix A.
func enumerate() []seq {
	out := []seq{{comm(F, costmodel.Allreduce, false)}}
	for _, p := range utPairs {
		out = append(out, prefix(seq{comm(F1, p.one, false)}, t1(F2, p.two))...)
	}
	out = append(out, seq{cStep, comm(F, costmodel.Allgather, true), dStep})
	for _, p := range ctPairs {
		out = append(out, prefix(seq{cStep, comm(F1, p.one, true)}, t2(F2, p.two))...)
	}
	for _, p := range utPairs {
		out = append(out, prefix(seq{comm(I1, p.one, false)}, t3(p.two))...)
		out = append(out, prefix(seq{comm(I1, p.one, false), cStep}, t4(p.two))...)
	}
	for _, p := range ctPairs {
		c1 := comm(I1, p.one, true)
		out = append(out, prefix(seq{cStep, c1}, t4(p.two))...)
		out = append(out, prefix(seq{cStep, c1, dStep}, t3(p.two))...)
		out = append(out, prefix(seq{cStep, c1, dStep, cStep}, t4(p.two))...)
	}
	return out
}

// Tree is the decision tree's options: every device-agnostic path (174),
// each standing for 2^Ops device variants (4341 in all).
type Tree struct {
	Paths []Path
	index map[string]int
}

// NewTree enumerates the tree, keeping only paths with at most maxComps
// Comp steps (0: no limit; the paper lets users bound the compressions per
// tensor to protect accuracy).
func NewTree(maxComps int) *Tree {
	t := &Tree{index: map[string]int{}}
	for _, s := range enumerate() {
		p := Path{Steps: s}
		first := true
		for _, st := range s {
			if st.Kind == Comp {
				p.Comps++
			}
			if st.Kind == Comm && first {
				p.Flat, first = st.Phase <= F2, false
			}
		}
		if maxComps > 0 && p.Comps > maxComps {
			continue
		}
		t.index[p.String()] = len(t.Paths)
		t.Paths = append(t.Paths, p)
	}
	return t
}

// Count is the number of options with devices: Σ 2^Ops over the paths.
func (t *Tree) Count() int {
	n := 0
	for _, p := range t.Paths {
		n += 1 << p.Ops()
	}
	return n
}

// Option is one choice for a gradient: a path of the tree and, for each of
// its Comp/Decomp steps in order, whether it runs on the CPU (bit set) or
// the GPU.
type Option struct {
	Path int
	CPU  uint32
}

// Format writes the option with devices.
func (t *Tree) Format(o Option) string { return t.Paths[o.Path].Format(o.CPU, true) }

// Parse reads an option written by Format (or a device-agnostic path,
// whose steps then run on the GPU).
func (t *Tree) Parse(s string) (Option, error) {
	var cpu uint32
	var plain []string
	op := 0
	for _, f := range strings.Split(s, ">") {
		f = strings.TrimSpace(f)
		base, dev, hasDev := strings.Cut(f, "@")
		if base == "C" || base == "D" {
			switch {
			case !hasDev || dev == "gpu":
			case dev == "cpu":
				cpu |= 1 << op
			default:
				return Option{}, fmt.Errorf("option %q: step %q: device must be gpu or cpu", s, f)
			}
			op++
		} else if hasDev {
			return Option{}, fmt.Errorf("option %q: step %q: only C and D run on a device", s, f)
		}
		plain = append(plain, base)
	}
	i, ok := t.index[strings.Join(plain, " > ")]
	if !ok {
		return Option{}, fmt.Errorf("option %q is not a path of the decision tree", s)
	}
	return Option{Path: i, CPU: cpu}, nil
}

// Validate checks a path against the rules of §2.5: Comp only on
// uncompressed payloads, Decomp and compressed collectives only on
// compressed ones, divisible steps paired, and the path ends uncompressed.
func Validate(p Path) error {
	compressed := false
	var open [3]int // pending step-1 per level: 0 none, else pair step-2 op+1
	level := func(ph Phase) int {
		switch ph {
		case F1, F2:
			return 0
		case I1, I2:
			return 1
		}
		return 2
	}
	for i, s := range p.Steps {
		switch s.Kind {
		case Comp:
			if compressed {
				return fmt.Errorf("step %d: compression of a compressed payload", i)
			}
			compressed = true
		case Decomp:
			if !compressed {
				return fmt.Errorf("step %d: decompression of an uncompressed payload", i)
			}
			compressed = false
		case Comm:
			if s.Compressed != compressed {
				return fmt.Errorf("step %d: %v on a payload whose compression is %v", i, s, compressed)
			}
			switch s.Phase {
			case F1, I1, X1:
				ok := false
				for _, pr := range append(append([]pair{}, utPairs...), ctPairs...) {
					if pr.one == s.Op && (pr.one == costmodel.Alltoall || pr.one == costmodel.Gather) == s.Compressed {
						open[level(s.Phase)] = int(pr.two) + 1
						ok = true
					}
				}
				if !ok {
					return fmt.Errorf("step %d: %v is not a first step", i, s)
				}
			case F2, I2, X2:
				if open[level(s.Phase)] != int(s.Op)+1 {
					return fmt.Errorf("step %d: %v does not pair with its first step", i, s)
				}
				open[level(s.Phase)] = 0
			case F, X:
				want := costmodel.Allreduce
				if s.Compressed {
					want = costmodel.Allgather
				}
				if s.Op != want {
					return fmt.Errorf("step %d: indivisible %v must be %v", i, s, want)
				}
			}
		}
	}
	if compressed {
		return fmt.Errorf("path ends compressed")
	}
	return nil
}

// Restrict returns the tree with only the named paths (device-agnostic
// text, as Path.String writes them), in the tree's order: the planner's
// search space then holds only those (Fig. 15's crippled variants, or a
// deployment that supports a few schemes).
func (t *Tree) Restrict(names []string) (*Tree, error) {
	keep := map[int]bool{}
	for _, n := range names {
		o, err := t.Parse(n)
		if err != nil {
			return nil, err
		}
		if o.CPU != 0 {
			return nil, fmt.Errorf("restrict %q: name paths without devices", n)
		}
		keep[o.Path] = true
	}
	out := &Tree{index: map[string]int{}}
	for i, p := range t.Paths {
		if keep[i] {
			out.index[p.String()] = len(out.Paths)
			out.Paths = append(out.Paths, p)
		}
	}
	if len(out.Paths) == 0 {
		return nil, fmt.Errorf("restrict: no path left")
	}
	plain := false
	for _, p := range out.Paths {
		plain = plain || p.Comps == 0
	}
	if !plain {
		return nil, fmt.Errorf("restrict: keep at least one uncompressed path (no compression is every plan's start)")
	}
	return out, nil
}
