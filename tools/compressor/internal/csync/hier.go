package csync

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/tensor"
)

// Hier runs batches in two levels when ranks share a node (Espresso's
// hierarchical communication): every node's ranks send their tensors to
// the node's leader (its local rank 0, phase "intra"), which sums them in
// local-rank order from +0; the leaders run the batch's compressed
// collectives among themselves (Inter, a Syncer on a mesh of the leaders,
// node i its rank i: one "virtual rank" per node, with the node's error
// feedback); each leader sends the results back to its node's ranks. The
// result equals HierRef: Ref over the nodes of the node sums.
type Hier struct {
	// World is the Syncer over every rank (the agreement, the intra-node
	// transfers).
	World *Syncer
	// Inter is the leaders' Syncer (nil on the other ranks).
	Inter *Syncer
	// Nodes lists each node's world ranks by local rank.
	Nodes       [][]int
	node, local int
	intra       *mesh.Phase
	calls       uint32
}

// Topology agrees on every rank's node and local rank (node, local of
// this one) and returns each node's ranks by local rank. Nodes must be
// numbered 0..N−1 and local ranks 0..L−1 on each, once each.
func Topology(ctx context.Context, s *Syncer, node, local int) ([][]int, error) {
	mine := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(node)), uint64(local))
	all := make([]byte, 16*s.n)
	if err := s.meta.AllGatherVBytes(ctx, mine, s.each(16), all); err != nil {
		return nil, err
	}
	var nodes [][]int
	for p := range s.n {
		nd, lc := binary.LittleEndian.Uint64(all[16*p:]), binary.LittleEndian.Uint64(all[16*p+8:])
		if nd >= uint64(s.n) || lc >= uint64(s.n) {
			return nil, &MismatchError{Msg: fmt.Sprintf("topology: rank %d says it is local rank %d of node %d in a world of %d", p, int64(lc), int64(nd), s.n), Rank: p, Field: "node"}
		}
		for len(nodes) <= int(nd) {
			nodes = append(nodes, nil)
		}
		for len(nodes[nd]) <= int(lc) {
			nodes[nd] = append(nodes[nd], -1)
		}
		if q := nodes[nd][lc]; q >= 0 {
			return nil, &MismatchError{Msg: fmt.Sprintf("topology: ranks %d and %d are both local rank %d of node %d", q, p, lc, nd), Rank: p, Field: "local rank"}
		}
		nodes[nd][lc] = p
	}
	for i, ranks := range nodes {
		for l, p := range ranks {
			if p < 0 {
				return nil, &MismatchError{Msg: fmt.Sprintf("topology: node %d has no local rank %d (nodes 0..%d, local ranks from 0, each once)", i, l, len(nodes)-1), Rank: s.r, Field: "node"}
			}
		}
	}
	return nodes, nil
}

// NewHier returns the two-level runner of world's batches: inter is the
// leaders' Syncer on a leader, nil elsewhere.
func NewHier(world, inter *Syncer, nodes [][]int) (*Hier, error) {
	h := &Hier{World: world, Inter: inter, Nodes: nodes, intra: world.m.Phase("intra")}
	h.node, h.local = -1, -1
	for i, ranks := range nodes {
		for l, p := range ranks {
			if p == world.r {
				h.node, h.local = i, l
			}
		}
	}
	if h.node < 0 {
		return nil, fmt.Errorf("csync: rank %d is on no node", world.r)
	}
	if (h.local == 0) != (inter != nil) {
		return nil, fmt.Errorf("csync: rank %d (local rank %d of node %d): the leaders, and only they, run the inter-node syncer", world.r, h.local, h.node)
	}
	if inter != nil && (inter.n != len(nodes) || inter.r != h.node) {
		return nil, fmt.Errorf("csync: the inter-node syncer is rank %d of %d, want node %d of %d", inter.r, inter.n, h.node, len(nodes))
	}
	return h, nil
}

// Finish is Syncer.Finish on the world, then among the leaders.
func (h *Hier) Finish(ctx context.Context) error {
	if err := h.World.Finish(ctx); err != nil {
		return err
	}
	if h.Inter != nil {
		return h.Inter.Finish(ctx)
	}
	return nil
}

// Leader says whether this rank leads its node.
func (h *Hier) Leader() bool { return h.local == 0 }

// syncBatch is Syncer.syncBatch in two levels: the world agrees on the
// units (strict: all; else the prefix every rank has), then intra-node
// sums, the leaders' batch, and the results back.
func (h *Hier) syncBatch(ctx context.Context, us []*Unit, sps []Spec, strict bool) ([][]float32, *Stats, error) {
	w := h.World
	jobs, err := w.admit(ctx, us, sps, strict)
	if err != nil {
		return nil, nil, err
	}
	before := w.m.Counters()
	t0 := time.Now()
	st := &Stats{Collective: batchCollective(jobs), Times: map[string]float64{}}
	total := 0
	for _, j := range jobs {
		total += len(j.u.Data)
	}
	h.calls++
	tag := uint32(0x7e)<<24 | h.calls&0xffffff
	ranks := h.Nodes[h.node]
	buf := tensor.Alloc(total)
	if !h.Leader() {
		pack(buf, jobs, func(j *job) []float32 { return j.u.Data })
		if err := h.intra.Send(ranks[0], tag, f32Bytes(buf)); err != nil {
			return nil, nil, err
		}
		b := f32Bytes(buf)
		if err := h.intra.Recv(ranks[0], tag, b); err != nil {
			return nil, nil, err
		}
		setF32(buf, b)
		return h.done(jobs, buf, st, before, t0, nil)
	}
	sums, err := h.nodeSums(jobs, ranks, tag, total)
	if err != nil {
		return nil, nil, err
	}
	nus := make([]*Unit, len(jobs))
	nsps := make([]Spec, len(jobs))
	for i, j := range jobs {
		nus[i] = &Unit{Name: j.u.Name, Step: j.u.Step, Shape: j.u.Shape, Data: sums[i]}
		nsps[i] = j.sp
	}
	outs, xst, err := h.Inter.SyncBatch(ctx, nus, nsps)
	if err != nil {
		w.m.Abort(fmt.Errorf("rank %d (leader of node %d): inter-node: %w", w.r, h.node, err))
		return nil, nil, fmt.Errorf("inter-node (leader of node %d): %w", h.node, err)
	}
	for i, j := range jobs {
		j.out = outs[i]
	}
	pack(buf, jobs, func(j *job) []float32 { return j.out })
	b := f32Bytes(buf)
	for _, p := range ranks[1:] {
		if err := h.intra.Send(p, tag, b); err != nil {
			return nil, nil, err
		}
	}
	return h.done(jobs, buf, st, before, t0, xst)
}

// nodeSums receives the node's other ranks' tensors and sums each unit in
// local-rank order from +0.
func (h *Hier) nodeSums(jobs []*job, ranks []int, tag uint32, total int) ([][]float32, error) {
	acc := tensor.Alloc(total)
	pack(acc, jobs, func(j *job) []float32 { return j.u.Data }) // +0 + x₀ = x₀ except −0
	for i, v := range acc {
		if v == 0 {
			acc[i] = 0 // +0 + −0 = +0
		}
	}
	if len(ranks) > 1 {
		x := tensor.Alloc(total)
		b := f32Bytes(x)
		for _, p := range ranks[1:] {
			if err := h.intra.Recv(p, tag, b); err != nil {
				return nil, err
			}
			setF32(x, b)
			tensor.Add(acc, x)
		}
	}
	sums := make([][]float32, len(jobs))
	off := 0
	for i, j := range jobs {
		sums[i] = acc[off : off+len(j.u.Data) : off+len(j.u.Data)]
		off += len(j.u.Data)
	}
	return sums, nil
}

// done splits the results and fills in the stats (the inter-node ones
// added on a leader).
func (h *Hier) done(jobs []*job, buf []float32, st *Stats, before mesh.Counters, t0 time.Time, xst *Stats) ([][]float32, *Stats, error) {
	outs := make([][]float32, len(jobs))
	off := 0
	for i, j := range jobs {
		outs[i] = buf[off : off+len(j.u.Data) : off+len(j.u.Data)]
		off += len(j.u.Data)
	}
	st.Sent, st.Recv = diff(before, h.World.m.Counters())
	if xst != nil {
		for ph, b := range xst.Sent {
			st.Sent["inter."+ph] += b
		}
		for ph, b := range xst.Recv {
			st.Recv["inter."+ph] += b
		}
		st.Times["encode"] = xst.Times["encode"]
	}
	st.Times["total"] = time.Since(t0).Seconds()
	return outs, st, nil
}

// pack concatenates each job's of(j) into buf.
func pack(buf []float32, jobs []*job, of func(*job) []float32) {
	off := 0
	for _, j := range jobs {
		off += copy(buf[off:], of(j))
	}
}

// HierRef is the reference of the two-level sync: each node's units
// summed in local-rank order from +0, then R (a Ref over len(nodes)
// ranks, node i its rank i) on the node sums.
func HierRef(R *Ref, nodes [][]int, us []*Unit, sp Spec) ([]float32, error) {
	nus := make([]*Unit, len(nodes))
	for i, ranks := range nodes {
		acc := make([]float32, len(us[ranks[0]].Data))
		for _, p := range ranks {
			addLoop(acc, us[p].Data)
		}
		u := *us[ranks[0]]
		u.Data = acc
		nus[i] = &u
	}
	out, _, err := R.Sync(nus, sp)
	return out, err
}

// maxShare bounds Share's text.
const maxShare = 256

// Share sends root's text (at most 256 bytes) to every rank under phase
// "meta" and returns it.
func (s *Syncer) Share(ctx context.Context, root int, text string) (string, error) {
	b := make([]byte, 2+maxShare)
	if s.r == root {
		if len(text) > maxShare {
			return "", fmt.Errorf("csync: share: %d bytes (at most %d)", len(text), maxShare)
		}
		binary.LittleEndian.PutUint16(b, uint16(len(text)))
		copy(b[2:], text)
	}
	if err := s.meta.BroadcastBytes(ctx, b, root); err != nil {
		return "", err
	}
	l := int(binary.LittleEndian.Uint16(b))
	if l > maxShare {
		return "", fmt.Errorf("csync: share: rank %d sent a %d-byte text", root, l)
	}
	return string(b[2 : 2+l]), nil
}
