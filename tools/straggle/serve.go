package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/serve"
	"trainwire.dev/tools/straggle/internal/engine"
	"trainwire.dev/tools/straggle/internal/inject"
)

// ServeCmd is straggle's sidecar: one per rank, joined to the mesh once,
// answering a training process's sync requests on a Unix socket, tensors
// in shared memory (docs/serve.md), with RNA's rounds (docs/straggle.md,
// "serve").
type ServeCmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`

	Mode string `help:"rna: RNA (a reply carries the rounds applied since the previous one: the average over their contributors, who may be fewer than the world); groups: Prague-style random groups from the shared seed, one round per request, each rank's reply its group's average (needs --rounds); allreduce: blocking ring allreduce, one round per request on every rank." enum:"rna,groups,allreduce" default:"rna" env:"TRAINWIRE_STRAGGLE_MODE"`
	RNAFlags
	Rounds    int          `help:"groups mode: the run's rounds (every rank's trainer makes this many requests; a rank whose client left joins the rest with null gradients)." default:"0" env:"TRAINWIRE_STRAGGLE_ROUNDS"`
	GroupSize int          `help:"groups mode: ranks per group." default:"2" env:"TRAINWIRE_STRAGGLE_GROUP_SIZE"`
	Dim       int          `help:"f32 elements of one step's gradient: the sizes of a sync request's tensors added up (every rank the same)." required:"" env:"TRAINWIRE_STRAGGLE_DIM"`
	Inject    inject.Flags `embed:""`
	Serve     serve.Flags  `embed:""`
}

// Run joins the mesh and serves one client. When it disconnects, its
// input has ended: the rank joins the remaining rounds with null
// gradients until the run ends (every rank's input ended and every
// gradient reduced), as sync does, and exits 0. SIGTERM exits 143,
// SIGINT 130, a failure the run cannot survive 3.
func (c *ServeCmd) Run(rio *cli.IO) error {
	rio.SetGrace(cli.ServiceGrace)
	if c.Probes < 1 || c.Dim < 1 || c.GroupSize < 1 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: --probes, --dim and --group-size must be at least 1"))
	}
	if (c.Mode == engine.ModeGroups) != (c.Rounds > 0) {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: --rounds is groups mode's, and groups mode needs it (with no coordinator every rank must run the same rounds)"))
	}
	model, err := c.Inject.Model()
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: %w", err))
	}
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: %w", err))
	}
	ln, socket, err := c.Serve.Listen(env)
	if err != nil {
		return err
	}
	defer ln.Close()
	cfgm := c.Mesh.Config(env, rio.Log)
	cfgm.Tolerant = c.Mode != engine.ModeAllreduce
	m, err := mesh.Open(rio.Ctx, cfgm)
	if err != nil {
		return err
	}
	defer m.Close()
	if err := agreeDim(rio.Ctx, m, c.Dim); err != nil {
		return err
	}
	workers := make([]int, m.World())
	for r := range workers {
		workers[r] = r
	}
	x := newServeExec(m, c.Dim, model, rand.New(rand.NewPCG(c.Seed, uint64(m.Rank())+1)))
	x.eng = engine.New(m, engine.Config{
		Mode: c.Mode, Probes: c.Probes, ProbeTimeout: c.ProbeTimeout, Eta: c.Eta, Sum: c.Accumulate == "sum",
		Controller: 0, Workers: workers, Seed: c.Seed, Dim: c.Dim, Timeout: c.Mesh.Timeout, Log: rio.Log,
		Rounds: c.Rounds, GroupSize: c.GroupSize,
	}, x.apply)
	ctx, cancel := context.WithCancel(rio.Ctx)
	defer cancel()
	go func() {
		x.runErr = x.eng.Run(ctx)
		close(x.done)
	}()
	srv := &serve.Server{Exec: x, Job: m, Rank: m.Rank(), Log: rio.Log, Limits: c.Serve.Limits(optContribute), Tolerant: cfgm.Tolerant}
	rio.Log.Info("serve: listening", "socket", socket, "rank", m.Rank(), "world", m.World(), "mode", c.Mode, "dim", c.Dim)
	err = srv.Serve(rio.Ctx, ln)
	if !errors.Is(err, serve.ErrClientGone) {
		cancel()
		<-x.done
		return serve.ExitError(rio.Ctx, err)
	}
	rio.Log.Info("serve: client disconnected; joining the rounds with null gradients until the run ends", "rank", m.Rank())
	x.eng.EndInput()
	select {
	case <-x.done:
	case <-rio.Ctx.Done():
		cancel()
		<-x.done
		return serve.ExitError(rio.Ctx, context.Cause(rio.Ctx))
	}
	if x.runErr != nil {
		return x.runErr
	}
	if err := m.Err(); err != nil {
		return err // this rank was dropped by the others: its rounds are not the job's
	}
	rio.Log.Info("straggle: serve done", "mode", c.Mode, "rank", m.Rank(), "rounds", len(x.eng.Weights), "contributions", x.eng.Contribs, "alive", m.Alive())
	return nil
}

// agreeDim checks that every rank's --dim is this rank's (an allgather,
// before the engine's messages flow on any link): RNA's rings cannot sum
// gradients of different sizes, and would retry their rounds forever.
func agreeDim(ctx context.Context, m *mesh.Mesh, dim int) error {
	if m.World() == 1 {
		return nil
	}
	counts := make([]int, m.World())
	for r := range counts {
		counts[r] = 8
	}
	all := make([]byte, 8*m.World())
	if err := collective.New(m, collective.Options{}).AllGatherVBytes(ctx, binary.LittleEndian.AppendUint64(nil, uint64(dim)), counts, all); err != nil {
		return fmt.Errorf("serve: comparing --dim with the other ranks: %w", err)
	}
	for r := range counts {
		if d := binary.LittleEndian.Uint64(all[8*r:]); d != uint64(dim) {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: --dim %d on this rank (%d), %d on rank %d: every rank's gradient must have the same elements", dim, m.Rank(), d, r))
		}
	}
	return nil
}
