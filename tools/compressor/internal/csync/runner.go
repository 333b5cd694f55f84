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
	S *Syncer
	// H, when set, runs the batches in two levels (S is H.World).
	H    *Hier
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

// Group is one fusion group's tensors (or one tensor) at a step.
type Group struct {
	Step    int64
	Tensors []Tensor
}

// unit is the group as one unit: its tensor, or its tensors concatenated
// under GroupName.
func (g Group) unit() *Unit {
	u := &Unit{Step: g.Step}
	ts := g.Tensors
	if len(ts) == 1 {
		u.Name, u.Shape, u.Data = ts[0].Name, ts[0].Shape, ts[0].Data
		return u
	}
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
	return u
}

// SyncGroup syncs the tensors of one group (or one tensor) at step and
// returns each one's sum over the ranks.
func (rn *Runner) SyncGroup(ctx context.Context, step int64, ts []Tensor) ([][]float32, *Stats, error) {
	res, st, err := rn.SyncGroups(ctx, []Group{{Step: step, Tensors: ts}})
	if err != nil {
		return nil, nil, err
	}
	return res[0], st, nil
}

// SyncGroups syncs several groups in one batch (one agreement, buckets
// pipelined: Syncer.SyncBatch) and returns each group's tensors' sums.
func (rn *Runner) SyncGroups(ctx context.Context, gs []Group) ([][][]float32, *Stats, error) {
	return rn.syncGroups(ctx, gs, true)
}

// SyncAvailable syncs the longest prefix of gs that every rank has
// passed (Syncer.SyncAvailable) and returns its groups' sums.
func (rn *Runner) SyncAvailable(ctx context.Context, gs []Group) ([][][]float32, *Stats, error) {
	return rn.syncGroups(ctx, gs, false)
}

func (rn *Runner) syncGroups(ctx context.Context, gs []Group, strict bool) ([][][]float32, *Stats, error) {
	us := make([]*Unit, len(gs))
	sps := make([]Spec, len(gs))
	for i, g := range gs {
		sp, err := rn.SpecFor(g.Tensors)
		if err != nil {
			return nil, nil, rn.S.local(err)
		}
		us[i], sps[i] = g.unit(), sp
	}
	sync := rn.S.syncBatch
	if rn.H != nil {
		sync = rn.H.syncBatch
	}
	outs, st, err := sync(ctx, us, sps, strict)
	if err != nil {
		return nil, nil, err
	}
	res := make([][][]float32, len(outs))
	for i, g := range gs[:len(outs)] {
		res[i] = make([][]float32, len(g.Tensors))
		off := 0
		for k, t := range g.Tensors {
			res[i][k] = outs[i][off : off+len(t.Data)]
			off += len(t.Data)
		}
	}
	return res, st, nil
}

// Release hands the sums of SyncGroups or SyncAvailable back for reuse
// (Syncer.Release) once the caller has written them out: a group's
// tensors share one buffer, its first tensor's.
func (rn *Runner) Release(res [][][]float32) {
	for _, g := range res {
		n := 0
		for _, t := range g {
			n += len(t)
		}
		if len(g) > 0 && n <= cap(g[0]) {
			rn.S.Release(g[0][:n])
		}
	}
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
