package espresso

import "math"

// BruteForce returns the strategy with the least F among every
// combination of allowed[i] (the options gradient i may take), by a
// depth-first walk that shares the timeline of common prefixes (the
// timeline serves gradients in order, so a prefix's state does not depend
// on what follows) and cuts a branch once what has already ended reaches
// the best F found. Ties keep the first in lexicographic order of the
// allowed lists. It is exponential: for tests and tiny instances.
func (in *Instance) BruteForce(allowed [][]Option) ([]Option, float64, error) {
	if len(allowed) != in.n {
		return nil, 0, ErrInput
	}
	ps := make([][]*prog, in.n)
	for i, os := range allowed {
		for _, o := range os {
			p, err := in.prog(i, o, false)
			if err != nil {
				return nil, 0, err
			}
			ps[i] = append(ps[i], p)
		}
	}
	states := make([]*state, in.n+1)
	for i := range states {
		states[i] = in.newState()
	}
	cur := make([]int, in.n)
	bestF := math.Inf(1)
	var best []int
	var walk func(i int)
	walk = func(i int) {
		if i == in.n {
			if f := in.total(states[i]); f < bestF {
				bestF = f
				best = append(best[:0], cur...)
			}
			return
		}
		for k, p := range ps[i] {
			st := states[i+1]
			st.copyFrom(states[i])
			in.step(st, i, p, nil)
			if in.Job.ForwardNS+st.maxEnd+in.Job.UpdateNS >= bestF {
				continue
			}
			cur[i] = k
			walk(i + 1)
		}
	}
	walk(0)
	if best == nil {
		return nil, 0, ErrInput
	}
	out := make([]Option, in.n)
	for i, k := range best {
		out[i] = allowed[i][k]
	}
	return out, bestF, nil
}
