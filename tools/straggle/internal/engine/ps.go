package engine

import (
	"fmt"
	"slices"

	"trainwire.dev/lib/tensor"
)

// paramServer is rna-h's parameter server (the thesis's §5.2 PS, run by
// the controller), asynchronous in the way of the parameter-server
// approach it cites: it holds one global model and adds to it what each
// group learned since it last started from it.
//
// Every group starts from the model all workers share when the groups
// form (its initiator pushes it before the group's first round: base).
// A group's push every --ps-period rounds carries its model P; the
// server adds P − base_g (the group's own progress) to the global model
// and hands the group the result, which becomes base_g. A fast group is
// therefore never pulled back toward a slow group's older model (as an
// average of the groups' newest models does: the fast group then moves
// at the slow group's pace); a slow group's progress, computed on an
// older model, is added as a stale update, which is what asynchronous
// SGD tolerates.
type paramServer struct {
	global []float32
	base   map[int][]float32 // by group index
}

func newParamServer() *paramServer { return &paramServer{base: map[int][]float32{}} }

// start records group gi's starting model (its base push).
func (ps *paramServer) start(gi int, model []byte) error {
	p, err := ps.decode(model)
	if err != nil {
		return err
	}
	if ps.global == nil {
		ps.global = p
	}
	ps.base[gi] = slices.Clone(p)
	return nil
}

// push adds group gi's progress to the global model and returns the
// model the group loads next (little-endian float32).
func (ps *paramServer) push(gi int, model []byte) ([]byte, error) {
	p, err := ps.decode(model)
	if err != nil {
		return nil, err
	}
	b, ok := ps.base[gi]
	if !ok || ps.global == nil {
		// No base push came (a controller that took over mid-run): the
		// group's model is where it starts from.
		if err := ps.start(gi, model); err != nil {
			return nil, err
		}
		return tensor.Bytes(slices.Clone(ps.global)), nil
	}
	for i := range ps.global {
		ps.global[i] += p[i] - b[i]
	}
	ps.base[gi] = slices.Clone(ps.global)
	return tensor.Bytes(slices.Clone(ps.global)), nil
}

// decode reads a pushed model, which must have the global model's size.
func (ps *paramServer) decode(model []byte) ([]float32, error) {
	if len(model)%4 != 0 {
		return nil, fmt.Errorf("pushed model of %d bytes: not float32s", len(model))
	}
	if ps.global != nil && len(model)/4 != len(ps.global) {
		return nil, fmt.Errorf("pushed model of %d parameters, the server holds %d", len(model)/4, len(ps.global))
	}
	return slices.Clone(tensor.Float32sOrCopy(model)), nil
}
