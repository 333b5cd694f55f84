package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/csync"
)

// maxBatchBytes bounds the input read ahead of the sync, and so a batch.
const maxBatchBytes = 64 << 20

// item is one frame of the input (or its error) and its payload size.
type item struct {
	f    wire.Frame
	err  error
	size int
}

// reader decodes the input ahead of the sync, up to maxBatchBytes of
// frames queued: the tensors a batch syncs together are those already
// read when the previous batch ends.
type reader struct {
	items  chan item
	mu     sync.Mutex
	cond   *sync.Cond
	queued int
	// pool lends the tensors' payloads; the sync loop hands a batch's
	// back once its sums are written.
	pool tensor.Pool
}

func startReader(ctx context.Context, in io.Reader, lim wire.Limits) *reader {
	rd := &reader{items: make(chan item, 1<<16)}
	rd.cond = sync.NewCond(&rd.mu)
	stop := context.AfterFunc(ctx, func() {
		rd.mu.Lock()
		rd.cond.Broadcast()
		rd.mu.Unlock()
	})
	go func() {
		defer stop()
		defer close(rd.items)
		wr := wire.NewReader(in, lim)
		wr.SetPool(&rd.pool)
		for {
			f, err := wr.NextFrame()
			if err == io.EOF {
				return
			}
			switch f.(type) {
			case *wire.Header, *wire.End:
				continue
			}
			if err != nil {
				err = cli.WithCode(cli.ExitBadInput, fmt.Errorf("sync: input: %w", err))
			}
			it := item{f: f, err: err}
			if d, ok := f.(*wire.Dense); ok {
				it.size = len(d.Data)
			}
			rd.mu.Lock()
			for rd.queued > maxBatchBytes && ctx.Err() == nil {
				rd.cond.Wait()
			}
			rd.queued += it.size
			rd.mu.Unlock()
			select {
			case rd.items <- it:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return rd
}

// taken releases an item's bytes from the read-ahead budget.
func (rd *reader) taken(it item) {
	rd.mu.Lock()
	rd.queued -= it.size
	rd.cond.Broadcast()
	rd.mu.Unlock()
}

// syncLoop is compressor sync's loop: it collects the input's tensors
// (and fusion groups) and syncs what it has read in batches — one
// agreement and pipelined buckets per batch — writing every sum, and a
// step's end after its sums.
type syncLoop struct {
	c           *SyncCmd
	rn          *csync.Runner
	m           *mesh.Mesh
	w, statsW   *wire.Writer
	rank, world int

	groups       map[int]*fusing
	inputs       *tensor.Pool // the reader's: where the input payloads come from
	pending      [][]*wire.Dense
	pendingBytes int
	total        map[string]int64
	syncTime     time.Duration
	n            int
}

func (lp *syncLoop) bad(err error) error {
	lp.m.Abort(fmt.Errorf("rank %d: bad input: %w", lp.rank, err))
	return cli.WithCode(cli.ExitBadInput, err)
}

// run reads the input to its end. It waits for input only with nothing
// pending; otherwise it adds what is ready and syncs.
func (lp *syncLoop) run(ctx context.Context, rd *reader) error {
	// A peer that dies while this rank waits for input must still end it.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if len(lp.pending) == 0 {
			var it item
			var ok bool
			select {
			case it, ok = <-rd.items:
			case <-tick.C:
				if err := lp.m.Err(); err != nil {
					return fmt.Errorf("sync: waiting for input: %w", err)
				}
				continue
			}
			if !ok {
				break
			}
			rd.taken(it)
			if err := lp.add(ctx, it); err != nil {
				return err
			}
		}
		eof, err := lp.drain(ctx, rd)
		if err != nil {
			return err
		}
		if eof {
			break
		}
		if err := lp.flush(ctx, false); err != nil {
			return err
		}
	}
	if err := unfinished(lp.groups); err != nil {
		return lp.bad(fmt.Errorf("sync: input ended: %w", err))
	}
	return lp.flush(ctx, true)
}

// drain adds the frames that are ready, up to maxBatchBytes pending.
func (lp *syncLoop) drain(ctx context.Context, rd *reader) (eof bool, err error) {
	for lp.pendingBytes < maxBatchBytes {
		select {
		case it, ok := <-rd.items:
			if !ok {
				return true, nil
			}
			rd.taken(it)
			if err := lp.add(ctx, it); err != nil {
				return false, err
			}
		default:
			return false, nil
		}
	}
	return false, nil
}

// add takes one input frame: a tensor (or a fusion group once complete)
// becomes pending; a step's end syncs everything pending and is written.
func (lp *syncLoop) add(ctx context.Context, it item) error {
	if it.err != nil {
		return lp.bad(it.err)
	}
	switch f := it.f.(type) {
	case *wire.StepEnd:
		if err := unfinished(lp.groups); err != nil {
			return lp.bad(fmt.Errorf("sync: step %d ended: %w", f.Step, err))
		}
		if err := lp.flush(ctx, true); err != nil {
			return err
		}
		if err := lp.w.EndStep(f.Step); err != nil {
			return err
		}
		if lp.statsW != nil {
			if err := lp.statsW.EndStep(f.Step); err != nil {
				return err
			}
		}
		return lp.w.Flush()
	case *wire.Dense:
		return lp.addDense(f)
	default:
		return lp.bad(fmt.Errorf("sync: input frame %s: compressor sync reads dense f32 tensor frames", it.f.Type()))
	}
}

func (lp *syncLoop) addDense(f *wire.Dense) error {
	if f.DType != wire.F32 {
		return lp.bad(fmt.Errorf("sync: tensor %q is %s, want f32", f.Name, f.DType))
	}
	g, members, fused, err := lp.rn.Plan.GroupOf(f.Name)
	if err != nil {
		return lp.bad(err)
	}
	if !fused {
		lp.push([]*wire.Dense{f})
		return nil
	}
	p := lp.groups[g]
	if p == nil {
		p = &fusing{members: members, got: map[string]*wire.Dense{}, step: f.Step}
		lp.groups[g] = p
	}
	if _, dup := p.got[f.Name]; dup {
		return lp.bad(fmt.Errorf("sync: tensor %q twice in a step", f.Name))
	}
	if f.Step != p.step {
		return lp.bad(fmt.Errorf("sync: tensor %q is step %d, the rest of its fusion group step %d", f.Name, f.Step, p.step))
	}
	p.got[f.Name] = f
	if len(p.got) < len(p.members) {
		return nil
	}
	delete(lp.groups, g)
	frames := make([]*wire.Dense, len(p.members))
	for i, name := range p.members {
		frames[i] = p.got[name]
	}
	lp.push(frames)
	return nil
}

func (lp *syncLoop) push(frames []*wire.Dense) {
	lp.pending = append(lp.pending, frames)
	for _, d := range frames {
		lp.pendingBytes += len(d.Data)
	}
}

// flush syncs the pending groups every rank has too (all: until none is
// pending) and writes their sums.
func (lp *syncLoop) flush(ctx context.Context, all bool) error {
	for len(lp.pending) > 0 {
		if err := lp.syncSome(ctx); err != nil {
			return err
		}
		if !all {
			return nil
		}
	}
	return nil
}

// syncSome syncs the longest prefix of the pending groups that every rank
// has (Runner.SyncAvailable), writes its sums and one stats frame.
func (lp *syncLoop) syncSome(ctx context.Context) error {
	gs := make([]csync.Group, len(lp.pending))
	for i, frames := range lp.pending {
		gs[i].Step = frames[0].Step
		for _, d := range frames {
			x, err := d.F32()
			if err != nil {
				return lp.bad(err)
			}
			gs[i].Tensors = append(gs[i].Tensors, csync.Tensor{Name: d.Name, Shape: d.Shape, Data: x})
		}
	}
	t0 := time.Now()
	res, st, err := lp.rn.SyncAvailable(ctx, gs)
	if err != nil {
		return err
	}
	lp.syncTime += time.Since(t0)
	done := lp.pending[:len(res)]
	lp.pending = slices.Clone(lp.pending[len(res):])
	var names []string
	for i, frames := range done {
		for k, d := range frames {
			lp.pendingBytes -= len(d.Data)
			names = append(names, d.Name)
			if lp.c.Average {
				tensor.Scale(res[i][k], 1/float32(lp.world))
			}
			out := wire.NewDenseF32(d.Name, res[i][k], d.Shape...)
			out.Step, out.Rank = d.Step, int64(lp.rank)
			if err := lp.w.Write(out); err != nil {
				return err
			}
		}
	}
	for ph, b := range st.Sent {
		lp.total[ph] += b
	}
	lp.n += len(done)
	if lp.statsW != nil {
		sf := csync.StatsFrame(csync.GroupName(names), gs[0].Step, lp.rank, st)
		sf.Values["units"] = float64(len(done))
		if err := lp.statsW.Write(sf); err != nil {
			return err
		}
		if err := lp.statsW.Flush(); err != nil {
			return err
		}
	}
	if err := lp.w.Flush(); err != nil {
		return err
	}
	// Written out: the next step's sums and inputs reuse the buffers.
	lp.rn.Release(res)
	if lp.inputs != nil && tensor.ZeroCopy {
		for _, frames := range done {
			for _, d := range frames {
				if len(d.Data) >= 4096 && len(d.Data)%4 == 0 { // what the pool lends
					lp.inputs.Put(tensor.Float32s(d.Data))
				}
			}
		}
	}
	return nil
}

// unfinished names a fusion group some of whose tensors have not come.
func unfinished(groups map[int]*fusing) error {
	if len(groups) == 0 {
		return nil
	}
	gs := make([]int, 0, len(groups))
	for g := range groups {
		gs = append(gs, g)
	}
	slices.Sort(gs)
	p := groups[gs[0]]
	var missing []string
	for _, name := range p.members {
		if _, ok := p.got[name]; !ok {
			missing = append(missing, name)
		}
	}
	return fmt.Errorf("fusion group %d (%s) is missing %d of its %d tensors: %v", gs[0], csync.GroupName(p.members), len(missing), len(p.members), missing)
}
