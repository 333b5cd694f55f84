package main

import (
	"context"
	"encoding/binary"
	"fmt"

	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/wire"
)

// pairs checks an alltoall request's tensors, in pairs ("<name>.splits",
// then "<name>"), as the alltoall filter checks its frames.
func (e *executor) pairs(req *serve.Request, data [][]byte) ([]*a2aJob, error) {
	if len(req.Tensors)%2 != 0 {
		return nil, &serve.RequestError{ID: req.ID, Field: "tensors", Err: fmt.Errorf("%d tensors: an alltoall takes pairs (\"<name>.splits\", then \"<name>\")", len(req.Tensors))}
	}
	jobs := make([]*a2aJob, 0, len(req.Tensors)/2)
	for i := 0; i < len(req.Tensors); i += 2 {
		sp, rows := &req.Tensors[i], &req.Tensors[i+1]
		j, err := newJob(&wire.Dense{Name: sp.Name, DType: sp.DType, Shape: sp.Shape, Data: data[i]},
			&wire.Dense{Name: rows.Name, Rank: -1, DType: rows.DType, Shape: rows.Shape, Data: data[i+1]}, e.world)
		if err != nil {
			return nil, &serve.RequestError{ID: req.ID, Field: fmt.Sprintf("tensors[%d]", i), Err: err}
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// CheckAllToAll refuses a request whose pairs the alltoall filter would
// refuse (names, split sizes, shapes).
func (e *executor) CheckAllToAll(req *serve.Request, data [][]byte) error {
	_, err := e.pairs(req, data)
	return err
}

// AllToAll runs each pair through Sven's asynchronous alltoallv (the
// split sizes, then the rows) and returns, for each, the split sizes and
// rows received, in rank order.
func (e *executor) AllToAll(ctx context.Context, req *serve.Request, data [][]byte) ([][]byte, error) {
	jobs, err := e.pairs(req, data)
	if err != nil {
		return nil, err
	}
	out := make([][]byte, 0, len(data))
	for _, j := range jobs {
		got, rows, err := exchangeRows(ctx, e.comm, e.comm.AllToAllVAsync, j, e.maxPart)
		if err != nil {
			return nil, fmt.Errorf("alltoall %q: %w", j.name, err)
		}
		sp := make([]byte, 8*len(got))
		for k, s := range got {
			binary.LittleEndian.PutUint64(sp[8*k:], uint64(s))
		}
		out = append(out, sp, rows)
	}
	return out, nil
}
