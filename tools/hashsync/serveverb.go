package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

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
	Socket      string       `help:"Path of the Unix socket to listen on (mode 0600; its directory must be this user's and writable by nobody else); {rank} and {local_rank} in it are replaced, for launchers that give every rank the same environment." env:"TRAINWIRE_SERVE_SOCKET" required:""`
	MaxRequest  cli.ByteSize `help:"Largest request or reply message, inline tensors included." default:"64MiB" env:"TRAINWIRE_SERVE_MAX_REQUEST"`
	MaxTensors  int          `help:"Most tensors in one request." default:"65536" env:"TRAINWIRE_SERVE_MAX_TENSORS"`
}

// Run joins the mesh, serves one client, and returns when it disconnects
// (exit 0), on SIGTERM (143) or SIGINT (130), or when a peer fails (3).
func (c *ServeCmd) Run(rio *cli.IO) error {
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: %w", err))
	}
	cfg, err := c.config(env)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: %w", err))
	}
	if c.MaxRequest > 1<<31 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("serve: --max-request %d: at most 2 GiB", c.MaxRequest))
	}
	// Listen before joining the mesh: a bad path fails this rank alone, at once.
	socket := strings.NewReplacer("{rank}", fmt.Sprint(env.Rank), "{local_rank}", fmt.Sprint(env.LocalRank)).Replace(c.Socket)
	ln, err := serve.Listen(socket)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
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
	srv := &serve.Server{Exec: ex, Job: m, Rank: m.Rank(), Log: rio.Log,
		Limits: serve.Limits{MaxMessage: int(c.MaxRequest), MaxTensors: c.MaxTensors}}
	if m.World() > 1 {
		srv.Agree = serve.MeshAgreer{Comm: collective.New(m, collective.Options{})}
	}
	rio.Log.Info("serve: listening", "socket", socket, "rank", m.Rank(), "world", m.World(), "scheme", c.Scheme)
	err = srv.Serve(rio.Ctx, ln)
	switch {
	case errors.Is(err, serve.ErrClientGone):
		rio.Log.Info("serve: client disconnected", "rank", m.Rank())
		_ = m.Close() // the job's verdict, when the client left mid-request, is ours
		return nil
	case rio.Ctx.Err() != nil:
		return cli.WithCode(cli.InterruptCode(rio.Ctx), fmt.Errorf("serve: %w", err))
	}
	var fe *serve.FrameError
	if errors.As(err, &fe) {
		return cli.WithCode(cli.ExitBadInput, err)
	}
	return fmt.Errorf("serve: %w", err)
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
