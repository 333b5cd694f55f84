package main

import (
	"context"
	"fmt"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"

	"trainwire.dev/tools/hashsync/internal/scheme"
)

// executor runs `hashsync serve`'s sync requests (every tensor summed over
// the ranks, in place) and alltoall requests (servea2a.go).
type executor struct {
	comm     *collective.Comm
	syncer   *scheme.Syncer // nil for the dense scheme
	scheme   string
	rowWidth int
	world    int
	maxPart  int64 // the most bytes of rows a peer may announce in an alltoall
}

// Check refuses what hashsync cannot sum: not f32, misaligned, too many rows.
func (e *executor) Check(req *serve.Request) error {
	for i, t := range req.Tensors {
		field := func(k string) string { return fmt.Sprintf("tensors[%d].%s", i, k) }
		switch {
		case t.DType != wire.F32:
			return &serve.RequestError{ID: req.ID, Field: field("dtype"), Err: fmt.Errorf("%s: hashsync sums f32", t.DType)}
		case !t.Inline && t.Off%4 != 0:
			return &serve.RequestError{ID: req.ID, Field: field("off"), Err: fmt.Errorf("%d is not a multiple of 4 (f32 alignment)", t.Off)}
		}
		if e.syncer == nil {
			continue
		}
		rows, w := e.rows(&t)
		if w == 0 || int64(rows)*int64(w)*4 != t.Bytes() {
			return &serve.RequestError{ID: req.ID, Field: field("shape"), Err: fmt.Errorf("%v is not rows of %d (--row-width)", t.Shape, e.rowWidth)}
		}
		if rows > 1<<32-2 {
			return &serve.RequestError{ID: req.ID, Field: field("shape"), Err: fmt.Errorf("%d rows: hashsync indexes rows with 32 bits", rows)}
		}
	}
	return nil
}

// rows cuts a tensor into rows as `sync` cuts dense frames: of --row-width,
// else of its last dimension (1-D tensors: width 1).
func (e *executor) rows(t *serve.Tensor) (rows, width int) {
	numel := t.Bytes() / 4
	w := e.rowWidth
	if w == 0 {
		w = 1
		if len(t.Shape) >= 2 && t.Shape[len(t.Shape)-1] > 0 {
			w = int(t.Shape[len(t.Shape)-1])
		}
	}
	if numel%int64(w) != 0 {
		return 0, 0
	}
	return int(numel / int64(w)), w
}

// Sync sums each tensor over the ranks, in order, into its own memory.
func (e *executor) Sync(ctx context.Context, req *serve.Request, data [][]byte) error {
	for i := range req.Tensors {
		t := &req.Tensors[i]
		f := tensor.Float32s(data[i])
		if err := e.sum(ctx, t, f); err != nil {
			return fmt.Errorf("tensor %q (#%d): %w", t.Name, i, err)
		}
		if req.Average {
			tensor.Scale(f, 1/float32(e.world))
		}
		if !tensor.ZeroCopy { // f is a copy on this build
			tensor.EncodeLE(data[i], f)
		}
	}
	return nil
}

func (e *executor) sum(ctx context.Context, t *serve.Tensor, f []float32) error {
	if e.syncer == nil {
		return e.comm.AllReduce(ctx, f)
	}
	rows, w := e.rows(t)
	p := e.syncer.Prepare(scheme.FromDense(t.Name, f, rows, w))
	clear(f)
	p.DenseOut = f
	_, _, err := e.syncer.Sync(ctx, p)
	return err
}
