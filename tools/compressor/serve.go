package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/csync"
)

// ServeCmd is the sidecar: one per rank, joined to the mesh once,
// answering a training process's sync requests on a Unix socket (tensors
// in shared memory, docs/serve.md) with compressor sync's collectives;
// the error-feedback state is kept per tensor name for the whole job.
type ServeCmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`
	cli.WireFlags
	SyncFlags `embed:""`
	Serve     serve.Flags `embed:""`
}

// Request options compressor serve accepts besides average.
const (
	// OptSaveState writes the error-feedback state to --state-out after
	// the request's sync (atomically).
	OptSaveState = "save_state"
	// OptResetState drops every tensor's error-feedback state before it.
	OptResetState = "reset_state"
)

// Run joins the mesh, serves one client, and returns when it disconnects
// (exit 0), on SIGTERM (143) or SIGINT (130), or when a peer fails (3).
func (c *ServeCmd) Run(rio *cli.IO) error {
	rio.SetGrace(cli.ServiceGrace)
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: %w", err))
	}
	rn, hello, err := c.runner(c.Limits())
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	ln, socket, err := c.Serve.Listen(env)
	if err != nil {
		return err
	}
	defer ln.Close()
	m, err := mesh.Open(rio.Ctx, c.Mesh.Config(env, rio.Log))
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := csync.New(rio.Ctx, m, hello)
	if err != nil {
		return err
	}
	s.MaxBytes = int64(c.MaxPayload)
	s.NoOverlap = c.NoOverlap
	rn.S = s
	closeInter, err := c.setupHier(rio.Ctx, env, c.Mesh.Config(env, rio.Log), rn, hello)
	defer closeInter()
	if err != nil {
		return err
	}
	if err := c.readState(rio, rn, c.Limits()); err != nil {
		m.Abort(fmt.Errorf("rank %d: %w", m.Rank(), err))
		return err
	}
	ex := &executor{rn: rn, world: m.World(), rio: rio, stateOut: c.StateOut, algo: c.Algo}
	srv := &serve.Server{Exec: ex, Job: m, Rank: m.Rank(), Log: rio.Log, Limits: c.Serve.Limits(OptSaveState, OptResetState)}
	if m.World() > 1 {
		srv.Agree = serve.MeshAgreer{Comm: collective.NewWithPhases(m, collective.Options{}, collective.OnePhase("agree"))}
	}
	rio.Log.Info("serve: listening", "socket", socket, "rank", m.Rank(), "world", m.World(), "algo", c.Algo, "collective", c.Collective)
	err = srv.Serve(rio.Ctx, ln)
	if errors.Is(err, serve.ErrClientGone) {
		rio.Log.Info("serve: client disconnected", "rank", m.Rank())
		if c.StateOut != "" {
			if err := writeState(rio, c.StateOut, s.Store, c.Algo); err != nil {
				return err
			}
		}
		_ = m.Close()
		return nil
	}
	return serve.ExitError(rio.Ctx, err)
}

// executor runs `compressor serve`'s sync requests: each tensor (or
// fusion group whose tensors are all in the request) through csync, the
// sums written back in place.
type executor struct {
	rn       *csync.Runner
	world    int
	rio      *cli.IO
	stateOut string
	algo     string
}

// Check refuses what compressor cannot sum: not f32, misaligned, and
// state options without --state-out.
func (e *executor) Check(req *serve.Request) error {
	for i, t := range req.Tensors {
		field := func(k string) string { return fmt.Sprintf("tensors[%d].%s", i, k) }
		switch {
		case t.DType != wire.F32:
			return &serve.RequestError{ID: req.ID, Field: field("dtype"), Err: fmt.Errorf("%s: compressor sums f32", t.DType)}
		case !t.Inline && t.Off%4 != 0:
			return &serve.RequestError{ID: req.ID, Field: field("off"), Err: fmt.Errorf("%d is not a multiple of 4 (f32 alignment)", t.Off)}
		}
		if _, _, err := e.rn.Plan.Check(t.Name, t.Bytes()/4); err != nil {
			return &serve.RequestError{ID: req.ID, Field: field("name"), Err: err}
		}
		if _, _, _, err := e.rn.Plan.GroupOf(t.Name); err != nil {
			return &serve.RequestError{ID: req.ID, Field: field("name"), Err: err}
		}
	}
	if req.Opts[OptSaveState] && e.stateOut == "" {
		return &serve.RequestError{ID: req.ID, Field: "opts." + OptSaveState, Err: errors.New("the sidecar has no --state-out to save to")}
	}
	return nil
}

// Sync sums the tensors over the ranks, in request order (a fusion group
// at its first tensor's place), into their own memory.
func (e *executor) Sync(ctx context.Context, req *serve.Request, data [][]byte) error {
	if req.Opts[OptResetState] {
		e.rn.S.Store = codec.NewStore()
	}
	done := make([]bool, len(req.Tensors))
	index := map[string]int{}
	for i, t := range req.Tensors {
		index[t.Name] = i
	}
	var groups [][]int
	var gs []csync.Group
	for i := range req.Tensors {
		if done[i] {
			continue
		}
		idx := []int{i}
		if _, members, fused, _ := e.rn.Plan.GroupOf(req.Tensors[i].Name); fused && len(members) > 1 {
			all := make([]int, 0, len(members))
			for _, name := range members {
				if j, ok := index[name]; ok && !done[j] {
					all = append(all, j)
				}
			}
			if len(all) == len(members) {
				idx = all
			}
		}
		ts := make([]csync.Tensor, len(idx))
		for k, j := range idx {
			done[j] = true
			t := &req.Tensors[j]
			shape := t.Shape
			if len(shape) == 0 {
				shape = []int64{1}
			}
			ts[k] = csync.Tensor{Name: t.Name, Shape: shape, Data: tensor.Float32s(data[j])}
			if !tensor.ZeroCopy { // a copy on this build
				ts[k].Data = append([]float32(nil), ts[k].Data...)
			}
		}
		groups = append(groups, idx)
		gs = append(gs, csync.Group{Step: req.Step, Tensors: ts})
	}
	// One batch per request: one agreement, the buckets pipelined.
	res, _, err := e.rn.SyncGroups(ctx, gs)
	if err != nil {
		var me *csync.MismatchError
		if errors.As(err, &me) {
			return &mismatch{err: err, m: &serve.MismatchError{Seq: -1, Rank: me.Rank, Theirs: me.Field + " " + me.Theirs, Mine: me.Field + " " + me.Mine}}
		}
		return err
	}
	for g, idx := range groups {
		for k, j := range idx {
			if req.Average {
				tensor.Scale(res[g][k], 1/float32(e.world))
			}
			tensor.EncodeLE(data[j], res[g][k])
		}
	}
	e.rn.Release(res) // copied into the client's memory
	if req.Opts[OptSaveState] {
		if err := writeState(e.rio, e.stateOut, e.rn.S.Store, e.algo); err != nil {
			return fmt.Errorf("save_state: %w", err)
		}
	}
	return nil
}

// mismatch is csync's disagreement between ranks as serve's (reply code
// mismatch, rank the other one), with csync's message.
type mismatch struct {
	err error
	m   *serve.MismatchError
}

func (e *mismatch) Error() string { return e.err.Error() }
func (e *mismatch) Unwrap() error { return e.m }
