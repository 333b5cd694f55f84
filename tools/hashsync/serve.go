package main

import (
	"errors"
	"fmt"
	"os"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/serve"

	"trainwire.dev/tools/hashsync/internal/scheme"
)

// ServeCmd is the sidecar: one per rank, joined to the mesh once, answering
// a training process's sync requests on a Unix socket, tensors in shared
// memory (docs/serve.md).
type ServeCmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`

	SchemeFlags `embed:""`
	Serve       serve.Flags `embed:""`
}

// Run joins the mesh, serves one client, and returns when it disconnects
// (exit 0), on SIGTERM (143) or SIGINT (130), or when a peer fails (3).
func (c *ServeCmd) Run(rio *cli.IO) error {
	rio.SetGrace(cli.ServiceGrace)
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: %w", err))
	}
	cfg, err := c.config(env)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: %w", err))
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
	ex, err := newExecutor(rio, m, cfg, c.RowWidth)
	if err != nil {
		return err
	}
	ex.maxPart = int64(c.Serve.Limits().MaxMessage)
	srv := &serve.Server{Exec: ex, Job: m, Rank: m.Rank(), Log: rio.Log, Limits: c.Serve.Limits()}
	if m.World() > 1 {
		srv.Agree = serve.MeshAgreer{Comm: collective.New(m, collective.Options{})}
	}
	rio.Log.Info("serve: listening", "socket", socket, "rank", m.Rank(), "world", m.World(), "scheme", c.Scheme)
	err = srv.Serve(rio.Ctx, ln)
	if errors.Is(err, serve.ErrClientGone) {
		rio.Log.Info("serve: client disconnected", "rank", m.Rank())
		_ = m.Close() // the job's verdict, when the client left mid-request, is ours
		return nil
	}
	return serve.ExitError(rio.Ctx, err)
}

// newExecutor is the scheme the sidecar runs: lib/collective's ring
// allreduce, in place in the client's memory, for dense; a Syncer (after
// its configuration handshake) for the others.
func newExecutor(rio *cli.IO, m *mesh.Mesh, cfg scheme.Config, rowWidth int) (*executor, error) {
	ex := &executor{comm: collective.New(m, collective.Options{}), scheme: cfg.Scheme, rowWidth: rowWidth, world: m.World()}
	if cfg.Scheme != "dense" {
		s, err := scheme.New(rio.Ctx, m, cfg)
		if err != nil {
			return nil, err
		}
		ex.syncer = s
	}
	return ex, nil
}
