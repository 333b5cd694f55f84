package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/straggle/internal/engine"
	"trainwire.dev/tools/straggle/internal/inject"
)

// optContribute is serve's own request option: false hands over no
// gradient (the reply still carries the rounds applied).
const optContribute = "contribute"

// serveExec runs `straggle serve`'s sync requests: each hands the step's
// gradient to the engine (after the injected delay) and is answered with
// every round applied on this rank since the previous reply, waiting for
// one if none has been.
type serveExec struct {
	eng   *engine.Engine
	m     *mesh.Mesh
	dim   int
	model *inject.Model
	rng   *rand.Rand
	rank  int

	done   chan struct{} // closed when the engine's Run returned
	runErr error         // its result (read after done)

	mu      sync.Mutex
	applied chan struct{} // closed (and replaced) when a round is applied
	layout  []tensorInfo  // names and shapes, fixed by the first sync
	sum     []float32     // Σ of the rounds' sums since the last reply
	weight  int           // their Σw
	rounds  int
	contrib int // rounds among them this rank's gradient was in
	newest  uint64
}

func newServeExec(m *mesh.Mesh, dim int, model *inject.Model, rng *rand.Rand) *serveExec {
	return &serveExec{m: m, dim: dim, model: model, rng: rng, rank: m.Rank(), done: make(chan struct{}),
		applied: make(chan struct{}), sum: make([]float32, dim)}
}

// apply is the engine's Applier: the round waits for the next reply.
func (x *serveExec) apply(res *engine.Result) float64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.rounds == 0 {
		copy(x.sum, res.Sum) // one round: exactly its sum
	} else {
		tensor.Add(x.sum, res.Sum)
	}
	x.weight += res.Weight
	x.rounds++
	if res.Contributed {
		x.contrib++
	}
	x.newest = res.Round
	close(x.applied)
	x.applied = make(chan struct{})
	return math.NaN()
}

// Check refuses what straggle cannot run: not f32, misaligned, not --dim
// elements in all, tensors other than the first request's, average.
func (x *serveExec) Check(req *serve.Request) error {
	bad := func(field string, f string, a ...any) error {
		return &serve.RequestError{ID: req.ID, Field: field, Err: fmt.Errorf(f, a...)}
	}
	if req.Average {
		return bad("opts.average", "straggle's result is already the average over each round's contributors")
	}
	x.mu.Lock()
	layout := x.layout
	x.mu.Unlock()
	if layout != nil && len(req.Tensors) != len(layout) {
		return bad("tensors", "%d tensors; the first request had %d (every step the same tensors)", len(req.Tensors), len(layout))
	}
	n := int64(0)
	for i, t := range req.Tensors {
		field := func(k string) string { return fmt.Sprintf("tensors[%d].%s", i, k) }
		switch {
		case t.DType != wire.F32:
			return bad(field("dtype"), "%s: straggle averages f32", t.DType)
		case !t.Inline && t.Off%4 != 0:
			return bad(field("off"), "%d is not a multiple of 4 (f32 alignment)", t.Off)
		}
		if layout != nil && (t.Name != layout[i].name || !slices.Equal(t.Shape, layout[i].shape)) {
			return bad(field("name"), "%q %v; the first request had %q %v here", t.Name, t.Shape, layout[i].name, layout[i].shape)
		}
		n += t.Bytes() / 4
	}
	if n != int64(x.dim) {
		return bad("tensors", "%d f32 elements in all; --dim is %d (one step's gradient)", n, x.dim)
	}
	return nil
}

// Sync is SyncInfo without the figures.
func (x *serveExec) Sync(ctx context.Context, req *serve.Request, data [][]byte) error {
	_, err := x.SyncInfo(ctx, req, data)
	return err
}

// SyncInfo hands the gradient over (unless opts.contribute is false),
// waits until at least one round has been applied since the previous
// reply, and writes the rounds' average Σsum/Σw over the tensors.
func (x *serveExec) SyncInfo(ctx context.Context, req *serve.Request, data [][]byte) (map[string]int64, error) {
	x.mu.Lock()
	if x.layout == nil {
		for _, t := range req.Tensors {
			x.layout = append(x.layout, tensorInfo{t.Name, slices.Clone(t.Shape), int(t.Bytes() / 4)})
		}
	}
	x.mu.Unlock()
	if contribute, ok := req.Opts[optContribute]; !ok || contribute {
		if !sleepCtx(ctx, drawDur(x.model, x.rank, x.rng)) {
			return nil, context.Cause(ctx)
		}
		g := make([]float32, 0, x.dim)
		for i := range req.Tensors {
			g = append(g, tensor.Float32s(data[i])...)
		}
		x.eng.Push(uint64(req.Step), g)
	}
	x.mu.Lock()
	for x.rounds == 0 {
		ch := x.applied
		x.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-x.m.Aborted():
			return nil, x.m.Err()
		case <-x.done:
			if x.runErr != nil {
				return nil, x.runErr
			}
			return nil, errors.New("straggle: the run is over")
		}
		x.mu.Lock()
	}
	sum, w := x.sum, x.weight
	info := map[string]int64{"round": int64(x.newest), "rounds": int64(x.rounds), "contributors": int64(w), "contributed": int64(x.contrib)}
	x.sum, x.weight, x.rounds, x.contrib = make([]float32, x.dim), 0, 0, 0
	x.mu.Unlock()

	var inv float32
	if w > 0 {
		inv = 1 / float32(w)
	}
	off := 0
	for i := range req.Tensors {
		f := tensor.Float32s(data[i])
		for k := range f {
			f[k] = sum[off+k] * inv
		}
		off += len(f)
		if !tensor.ZeroCopy { // f is a copy on this build
			tensor.EncodeLE(data[i], f)
		}
	}
	return info, nil
}
