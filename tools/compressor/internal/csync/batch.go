package csync

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/wire"
)

// DefaultBucketBytes bounds the input of one bucket: the tensors of a batch
// whose collectives run together (one ring, one allgather) and whose
// encoding overlaps the previous bucket's exchange.
const DefaultBucketBytes = 16 << 20

// job is one unit of a batch and what its collective has computed so far.
type job struct {
	u    *Unit
	sp   Spec
	seq  int
	what string
	out  []float32
	// encode is the time this rank spent compressing it (s).
	encode float64
	// allgather and ring: the payload, its size from the layout (-1:
	// data-dependent) and this rank's own decoded encoding, or (an
	// allgathered sparsifier) its own frame instead.
	pl    []byte
	size  int64
	sent  []float32
	frame *wire.Compressed
	// powersgd
	ps *psgdJob
	// partitioned
	part *partJob
}

// bucket is a run of jobs executed together: one kind (batched) or a
// single job of a collective that runs alone.
type bucket struct {
	kind string
	jobs []*job
	err  error
}

// kindOf is the bucket kind of a job: jobs of one kind share a
// collective call; "" runs alone.
func kindOf(sp Spec) string {
	switch sp.Collective {
	case Dense, AllGather, PowerSGD, Partitioned:
		return sp.Collective
	case Ring:
		return Ring + "/" + sp.Codec.Algo()
	}
	return ""
}

// SyncBatch synchronises units (specs sps, one each) after one agreement
// of the ranks on all of them, and returns each unit's sum over the ranks
// (fresh slices) and the batch's stats. The units run in buckets of one
// collective kind (BucketBytes of input each): one collective call per
// bucket, and bucket b+1 is encoded while bucket b is exchanged and
// decoded. Every unit's result equals Sync's of that unit alone, bit for
// bit.
func (s *Syncer) SyncBatch(ctx context.Context, us []*Unit, sps []Spec) ([][]float32, *Stats, error) {
	return s.syncBatch(ctx, us, sps, true)
}

// SyncAvailable is SyncBatch on the longest prefix of us that every rank
// has passed (every rank at least one unit): ranks that batch what their
// input has ready sync the units that all of them have, and pass the rest
// again with the next ones. It returns the prefix's sums.
func (s *Syncer) SyncAvailable(ctx context.Context, us []*Unit, sps []Spec) ([][]float32, *Stats, error) {
	return s.syncBatch(ctx, us, sps, false)
}

func (s *Syncer) syncBatch(ctx context.Context, us []*Unit, sps []Spec, strict bool) ([][]float32, *Stats, error) {
	jobs, err := s.admit(ctx, us, sps, strict)
	if err != nil {
		return nil, nil, err
	}
	before := s.m.Counters()
	st := &Stats{Collective: batchCollective(jobs), Times: map[string]float64{}}
	t0 := time.Now()
	bs, serial := s.buckets(jobs)
	if err := s.runBuckets(ctx, bs, serial || s.NoOverlap || hasKind(bs, PowerSGD)); err != nil {
		return nil, nil, err
	}
	st.Times["total"] = time.Since(t0).Seconds()
	st.Sent, st.Recv = diff(before, s.m.Counters())
	outs := make([][]float32, len(jobs))
	for i, j := range jobs {
		outs[i] = j.out
		st.Times["encode"] += j.encode
	}
	return outs, st, nil
}

// hasKind says whether a bucket is of kind k. PowerSGD's buckets do not
// overlap: its P = M·Q of the next bucket competes for the cores with
// this one's Q = Mᵀ·P̂ and decode (measured in the emulated cluster, 4
// ranks on 2 loaded cores: 15.7 s per ResNet-101 step with the overlap,
// 11.3 s without; docs/bench.md).
func hasKind(bs []*bucket, k string) bool {
	for _, b := range bs {
		if b.kind == k {
			return true
		}
	}
	return false
}

func batchCollective(jobs []*job) string {
	if len(jobs) == 0 {
		return "none"
	}
	c := jobs[0].sp.Collective
	for _, j := range jobs[1:] {
		if j.sp.Collective != c {
			return "mixed"
		}
	}
	return c
}

// admit resolves the specs, checks each unit's shape, and agrees with the
// other ranks on every unit's name, step, shape, spec and finiteness in
// one exchange (strict: on all of them; else on the prefix every rank
// has, which it returns).
func (s *Syncer) admit(ctx context.Context, us []*Unit, sps []Spec, strict bool) ([]*job, error) {
	if len(us) != len(sps) {
		return nil, fmt.Errorf("csync: %d units, %d specs", len(us), len(sps))
	}
	jobs := make([]*job, len(us))
	fields := make([][]string, len(us))
	inputs := make([]string, len(us))
	for i, u := range us {
		s.seq++
		sp, err := sps[i].Resolve()
		if err != nil {
			return nil, err
		}
		shape := u.shape()
		if d, err := wire.Numel(shape); err != nil || d != int64(len(u.Data)) {
			return nil, s.local(fmt.Errorf("tensor %q: shape %v does not hold %d elements", u.Name, shape, len(u.Data)))
		}
		// A NaN or Inf is agreed on too: every rank then fails with a
		// mismatch naming the rank that has it, instead of the one rank
		// aborting the job.
		inputs[i] = "finite"
		if err := codec.CheckFinite(u.Name, u.Data); err != nil {
			inputs[i] = "not finite (" + err.Error() + ")"
		}
		fields[i] = append([]string{"tensor=" + u.Name, fmt.Sprint("step=", u.Step), fmt.Sprint("shape=", shape), "input=" + inputs[i]}, sp.Fields()...)
		jobs[i] = &job{u: u, sp: sp, seq: s.seq, what: fmt.Sprintf("tensor #%d (%q)", s.seq, u.Name)}
	}
	first := s.seq - len(us) + 1
	what := func(i int) string {
		if i < len(jobs) {
			return jobs[i].what
		}
		return fmt.Sprintf("tensor #%d", first+i)
	}
	k, err := s.agreeItems(ctx, what, fields, strict)
	if err != nil {
		return nil, err
	}
	jobs, inputs = jobs[:k], inputs[:k]
	s.seq = first + k - 1
	for i, in := range inputs {
		if in != "finite" { // the same on every rank: all of them refuse it
			return nil, &MismatchError{Msg: fmt.Sprintf("%s: every rank's input is %s here", jobs[i].what, in), Rank: s.r, Field: "input", Theirs: in, Mine: in}
		}
	}
	return jobs, nil
}

// buckets groups the jobs by kind (a tensor's result does not depend on
// the others', so the small tensors of a plan's dense all-reduces run in
// one ring however they interleave with its compressed ones), in buckets
// of at most BucketBytes of input, in the order of their first jobs; the
// other collectives run one job per bucket. When a tensor comes twice (its
// error feedback read after its first sync) the jobs keep their order,
// cut where the kind changes or the tensor comes again, and serial says
// that the buckets must not overlap.
func (s *Syncer) buckets(jobs []*job) (out []*bucket, serial bool) {
	limit := s.BucketBytes
	if limit <= 0 {
		limit = DefaultBucketBytes
	}
	seen := map[string]bool{}
	for _, j := range jobs {
		serial = serial || seen[j.u.Name]
		seen[j.u.Name] = true
	}
	open := map[string]*bucket{}
	bytes := map[*bucket]int{}
	var last *bucket
	clear(seen)
	for _, j := range jobs {
		k := kindOf(j.sp)
		cur := open[k]
		if serial {
			cur = last
			if cur != nil && (cur.kind != k || seen[j.u.Name]) {
				cur = nil
			}
		}
		if cur == nil || k == "" || bytes[cur] >= limit {
			cur = &bucket{kind: k}
			out = append(out, cur)
			open[k] = cur
			if serial {
				clear(seen)
			}
		}
		seen[j.u.Name] = true
		cur.jobs = append(cur.jobs, j)
		bytes[cur] += 4 * len(j.u.Data)
		last = cur
	}
	return out, serial
}

// runBuckets runs the buckets in order: a goroutine prepares (encodes)
// bucket b+1 while this one exchanges and finishes bucket b (serial: one
// after the other).
func (s *Syncer) runBuckets(ctx context.Context, bs []*bucket, serial bool) error {
	if serial {
		for _, b := range bs {
			if err := s.prepare(b); err != nil {
				return s.failed(b, err)
			}
			if err := s.exchange(ctx, b); err != nil {
				return s.failed(b, err)
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	ready := make(chan *bucket, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		defer close(ready)
		for _, b := range bs {
			// b belongs to the exchanging loop once sent (it sets b.err
			// too): this goroutine reads its own error, not b's.
			err := s.prepare(b)
			b.err = err
			select {
			case ready <- b:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})
	for b := range ready {
		if b.err == nil {
			b.err = s.exchange(ctx, b)
		}
		if b.err != nil {
			return s.failed(b, b.err)
		}
	}
	return ctx.Err()
}

// failed wraps a bucket's error with its first tensor, aborting the job
// when a peer's frame did not decode.
func (s *Syncer) failed(b *bucket, err error) error {
	var fe *codec.FrameError
	var le *LocalError
	var pe *mesh.PeerError
	var me *MismatchError
	if errors.As(err, &me) {
		return err
	}
	if errors.As(err, &fe) && !errors.As(err, &le) && !errors.As(err, &pe) {
		// A peer's frame that does not decode: every rank decodes the
		// same bytes, but abort so that none waits.
		s.m.Abort(fmt.Errorf("rank %d: %w", s.r, err))
	}
	j := b.jobs[0]
	name := fmt.Sprintf("tensor %q (#%d, %s)", j.u.Name, j.seq, j.sp.Collective)
	if len(b.jobs) > 1 {
		name = fmt.Sprintf("tensors %q..%q (#%d..#%d, %s)", j.u.Name, b.jobs[len(b.jobs)-1].u.Name, j.seq, b.jobs[len(b.jobs)-1].seq, j.sp.Collective)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// prepare does a bucket's work before its first message: the encodes.
func (s *Syncer) prepare(b *bucket) error {
	for _, j := range b.jobs {
		var err error
		switch j.sp.Collective {
		case AllGather, Ring:
			err = s.prepareEncoded(j)
		case PowerSGD:
			err = s.preparePowerSGD(j)
		case Partitioned:
			err = s.preparePartitioned(j)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// exchange runs a bucket's collectives and decodes its results.
func (s *Syncer) exchange(ctx context.Context, b *bucket) error {
	j := b.jobs[0]
	switch j.sp.Collective {
	case Dense:
		return s.denseAll(ctx, b.jobs)
	case AllGather:
		return s.allgatherAll(ctx, b.jobs)
	case Ring:
		return s.ringAll(ctx, b.jobs)
	case PowerSGD:
		return s.powersgdAll(ctx, b.jobs)
	case Partitioned:
		return s.partitionedAll(ctx, b.jobs)
	}
	st := &Stats{Times: map[string]float64{}}
	var err error
	switch j.sp.Collective {
	case A2AAG, A2ADense:
		j.out, err = s.partitioned(ctx, j.u, j.sp, st)
	case RSAG:
		j.out, err = s.rsag(ctx, j.u, j.sp, st)
	default:
		err = fmt.Errorf("csync: no collective %q", j.sp.Collective)
	}
	j.encode += st.Times["encode"]
	return err
}
