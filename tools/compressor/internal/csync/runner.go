package csync

import (
	"context"
	"fmt"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// Tensor is one gradient handed to a Runner.
type Tensor struct {
	Name  string
	Shape []int64 // nil: 1-D
	Data  []float32
}

// Runner chooses each tensor's or fusion group's Spec — from the
// compression plan when there is one, else Default — and syncs it.
type Runner struct {
	S    *Syncer
	Plan *Plan // nil: no plan
	// Default is the spec without a compression plan; with one, its
	// Memory and MemOpts still apply.
	Default Spec
	// PlanCodec is the compression plan's codec with the flags' options.
	PlanCodec codec.Codec
}

// GroupName is the name a fusion group of several tensors syncs under
// (its error-feedback state's key, its randomness's): first..last, with
// the count.
func GroupName(members []string) string {
	if len(members) == 1 {
		return members[0]
	}
	return fmt.Sprintf("%s..%s(%d)", members[0], members[len(members)-1], len(members))
}

// SpecFor returns the spec of a group of tensors (one, without fusion):
// with a compression plan, the collective planned for its largest member
// (the first of the largest), which must all be in the plan with their
// sizes.
func (rn *Runner) SpecFor(ts []Tensor) (Spec, error) {
	if rn.Plan == nil || rn.Plan.Tensors == nil {
		return rn.Default, nil
	}
	best, bestN := "", int64(-1)
	for _, t := range ts {
		pt, _, err := rn.Plan.Check(t.Name, int64(len(t.Data)))
		if err != nil {
			return Spec{}, err
		}
		if int64(len(t.Data)) > bestN {
			best, bestN = pt.Collective, int64(len(t.Data))
		}
	}
	sp := rn.Default
	sp.Collective = best
	sp.Codec = rn.PlanCodec
	if best == Dense {
		sp.Codec = nil
	}
	return sp, nil
}

// SyncGroup syncs the tensors of one group (or one tensor) at step and
// returns each one's sum over the ranks.
func (rn *Runner) SyncGroup(ctx context.Context, step int64, ts []Tensor) ([][]float32, *Stats, error) {
	sp, err := rn.SpecFor(ts)
	if err != nil {
		return nil, nil, rn.S.local(err)
	}
	u := &Unit{Step: step}
	if len(ts) == 1 {
		u.Name, u.Shape, u.Data = ts[0].Name, ts[0].Shape, ts[0].Data
	} else {
		names := make([]string, len(ts))
		n := 0
		for i, t := range ts {
			names[i] = t.Name
			n += len(t.Data)
		}
		u.Name = GroupName(names)
		u.Data = make([]float32, 0, n)
		for _, t := range ts {
			u.Data = append(u.Data, t.Data...)
		}
	}
	out, st, err := rn.S.Sync(ctx, u, sp)
	if err != nil {
		return nil, nil, err
	}
	res := make([][]float32, len(ts))
	off := 0
	for i, t := range ts {
		res[i] = out[off : off+len(t.Data)]
		off += len(t.Data)
	}
	return res, st, nil
}

// StatsFrame is one sync's stats as a frame.
func StatsFrame(name string, step int64, rank int, st *Stats) *wire.Stats {
	v := map[string]float64{}
	for _, ph := range sortedKeys(st.Sent) {
		v["sent_bytes."+ph] = float64(st.Sent[ph])
	}
	for _, ph := range sortedKeys(st.Recv) {
		v["recv_bytes."+ph] = float64(st.Recv[ph])
	}
	for k, s := range st.Times {
		v["time_s."+k] = s
	}
	return &wire.Stats{Tool: "compressor", Name: name, Step: step, Rank: int64(rank), Values: v,
		Labels: map[string]string{"collective": st.Collective}}
}
