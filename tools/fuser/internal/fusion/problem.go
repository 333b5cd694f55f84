// Package fusion plans Cupcake's tensor fusion: which consecutive
// gradients, in backprop order, to fuse into groups that are compressed
// and communicated together, so that the iteration time is minimal.
//
// The model (Cupcake, thesis §5.3, with the timeline semantics of
// specs/seed-cupcake-gemini.md A.3): one compute stream runs the backprop
// of every tensor in order, and a group's compression h right after the
// backprop of its last tensor; one communication stream sends the groups
// in order, a group starting when it is compressed and the previous group
// has been sent. The iteration time is the forward time A plus the end of
// the last communication.
package fusion

import (
	"errors"
	"fmt"
	"math"

	"trainwire.dev/lib/costmodel"
)

// Problem is one planning instance. Units are the caller's (the fuser
// command uses nanoseconds and bytes).
type Problem struct {
	// A is the forward-pass time.
	A float64
	// B[i] is the backprop time of tensor i; Size[i] its bytes.
	B, Size []float64
	// G is the communication cost of a group, H its compression cost
	// (encode and decode), both functions of the group's total size.
	G, H costmodel.Cost

	pb, ps []float64 // prefix sums of B and Size
}

// ErrProblem is wrapped by every error about a bad instance.
var ErrProblem = errors.New("bad fusion problem")

// NewProblem checks and prepares an instance: at least one tensor, sizes
// > 0, times finite and ≥ 0.
func NewProblem(a float64, size, b []float64, g, h costmodel.Cost) (*Problem, error) {
	if len(size) == 0 {
		return nil, fmt.Errorf("%w: no gradients", ErrProblem)
	}
	if len(size) != len(b) {
		return nil, fmt.Errorf("%w: %d sizes but %d backprop times", ErrProblem, len(size), len(b))
	}
	if bad(a) {
		return nil, fmt.Errorf("%w: forward time %g must be finite and non-negative", ErrProblem, a)
	}
	if g == nil || h == nil {
		return nil, fmt.Errorf("%w: missing communication or compression cost model", ErrProblem)
	}
	p := &Problem{A: a, B: b, Size: size, G: g, H: h, pb: make([]float64, len(b)+1), ps: make([]float64, len(b)+1)}
	for i := range size {
		if bad(b[i]) {
			return nil, fmt.Errorf("%w: gradient %d: backprop time %g must be finite and non-negative", ErrProblem, i, b[i])
		}
		if !(size[i] > 0) || math.IsInf(size[i], 0) {
			return nil, fmt.Errorf("%w: gradient %d: size %g must be positive", ErrProblem, i, size[i])
		}
		p.pb[i+1] = p.pb[i] + b[i]
		p.ps[i+1] = p.ps[i] + size[i]
	}
	for _, x := range []float64{p.ps[len(size)], p.ps[1]} {
		if c := g.At(x); bad(c) {
			return nil, fmt.Errorf("%w: communication cost %v gives %g at %g", ErrProblem, g, c, x)
		}
		if c := h.At(x); bad(c) {
			return nil, fmt.Errorf("%w: compression cost %v gives %g at %g", ErrProblem, h, c, x)
		}
	}
	return p, nil
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) || x < 0 }

// N is the number of tensors.
func (p *Problem) N() int { return len(p.B) }

// Subadditive reports whether both cost models make Algorithm 5.1's
// prunings sound.
func (p *Problem) Subadditive() bool { return p.G.Subadditive() && p.H.Subadditive() }

// Bsum is the backprop time of tensors i..j (0 when j < i).
func (p *Problem) Bsum(i, j int) float64 {
	if j < i {
		return 0
	}
	return p.pb[j+1] - p.pb[i]
}

// Bytes is the size of tensors i..j fused (0 when j < i).
func (p *Problem) Bytes(i, j int) float64 {
	if j < i {
		return 0
	}
	return p.ps[j+1] - p.ps[i]
}

// h and g are the compression and communication costs of tensors i..j
// fused; an empty range costs nothing.
func (p *Problem) h(i, j int) float64 {
	if j < i {
		return 0
	}
	return p.H.At(p.Bytes(i, j))
}

func (p *Problem) g(i, j int) float64 {
	if j < i {
		return 0
	}
	return p.G.At(p.Bytes(i, j))
}

// Group is a run of consecutive tensors First..Last (inclusive).
type Group struct {
	First, Last int
}

// state is the timeline after a prefix of groups: c the end of the compute
// stream, e the end of the communication stream.
type state struct{ c, e float64 }

// next is the transition of A.3 for the group k..i.
func (p *Problem) next(s state, k, i int) state {
	c := s.c + p.Bsum(k, i) + p.h(k, i)
	return state{c: c, e: math.Max(c, s.e) + p.g(k, i)}
}

// Step is one group's place in the timeline; times are from the start of
// the backward pass.
type Step struct {
	Group
	Bytes     float64
	BPEnd     float64 // backprop of its last tensor done
	CompEnd   float64 // compressed
	CommStart float64
	CommEnd   float64
}

// Eval returns the iteration time of groups and its timeline. groups must
// be a partition (see Check).
func (p *Problem) Eval(groups []Group) (float64, []Step) {
	steps := make([]Step, len(groups))
	var s state
	for a, gr := range groups {
		bp := s.c + p.Bsum(gr.First, gr.Last)
		n := p.next(s, gr.First, gr.Last)
		steps[a] = Step{Group: gr, Bytes: p.Bytes(gr.First, gr.Last), BPEnd: bp, CompEnd: n.c,
			CommStart: math.Max(n.c, s.e), CommEnd: n.e}
		s = n
	}
	return p.A + s.e, steps
}

// Time returns the iteration time of groups.
func (p *Problem) Time(groups []Group) float64 {
	var s state
	for _, gr := range groups {
		s = p.next(s, gr.First, gr.Last)
	}
	return p.A + s.e
}

// Check reports whether groups partition 0..n-1 into non-empty consecutive
// runs.
func Check(groups []Group, n int) error {
	if len(groups) == 0 {
		return errors.New("plan has no groups")
	}
	want := 0
	for a, gr := range groups {
		if gr.First != want || gr.Last < gr.First {
			return fmt.Errorf("group %d is [%d, %d]; it must start at %d and be non-empty", a, gr.First, gr.Last, want)
		}
		want = gr.Last + 1
	}
	if want != n {
		return fmt.Errorf("plan covers tensors 0..%d of 0..%d", want-1, n-1)
	}
	return nil
}

// relTol is the relative tolerance under which two iteration times tie.
const relTol = 1e-9

func tie(a, b float64) bool {
	if math.IsInf(a, 0) || math.IsInf(b, 0) {
		return a == b
	}
	return math.Abs(a-b) <= relTol*math.Max(math.Abs(a), math.Abs(b))
}

// Better reports whether plan a (time ta) is preferred to plan b (time tb):
// a shorter time (beyond the tolerance 1e-9 relative), then on a tie fewer
// groups, then the lexicographically smaller list of group ends. Every
// algorithm breaks ties this way, so they return the same plan.
func Better(ta float64, a []Group, tb float64, b []Group) bool {
	if !tie(ta, tb) {
		return ta < tb
	}
	return prefer(a, b) < 0
}

// prefer orders plans over the same tensors: fewer groups first, then the
// lexicographically smaller ends. It is consistent with prefixes: for equal
// suffixes, the preferred prefix makes the preferred plan.
func prefer(a, b []Group) int {
	if len(a) != len(b) {
		if len(a) < len(b) {
			return -1
		}
		return 1
	}
	for i := range a {
		if a[i].Last != b[i].Last {
			if a[i].Last < b[i].Last {
				return -1
			}
			return 1
		}
	}
	return 0
}
