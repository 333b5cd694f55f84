package main

import (
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/verbs"
	"trainwire.dev/lib/cli/verbs/check"
)

// CLI is straggle's command line.
type CLI struct {
	cli.Globals

	Version    cli.VersionCmd `cmd:"" help:"Print the version."`
	Dump       verbs.DumpCmd  `cmd:"" help:"Print any trainwire stream as JSON lines."`
	Check      check.Cmd      `cmd:"" help:"Check the mesh: every rank runs it; times and verifies ring allreduce; rank 0 reports."`
	Env        verbs.EnvCmd   `cmd:"" help:"Print this process's rank, world and master as its launcher set them."`
	Sync       SyncCmd        `cmd:"" help:"Synchronize this rank's gradients: rna (non-blocking, probes), rna-h (RNA in fast/slow groups), groups (random-group partial allreduce) or allreduce (blocking); every rank runs it. Exit 2: bad gradient stream; 3: a peer failure that could not be survived."`
	Controller ControllerCmd  `cmd:"" help:"Run only RNA's controller, as rank 0 of a run whose workers use --controller separate."`
	Serve      ServeCmd       `cmd:"" help:"Sidecar: one per rank, joined to the mesh once, answering its training process's sync requests on a Unix socket (tensors in shared memory) with RNA's rounds (docs/serve.md, docs/straggle.md). Exit 0 once its client has disconnected and the run has ended; 3: a peer failure that could not be survived."`
	Sim        SimCmd         `cmd:"" help:"What-if simulator: reproduce the spec's reference tables, or simulate RNA/BSP/solo under injected stragglers."`
}

var tool = cli.Tool{
	Name:        "straggle",
	Description: "straggle: straggler-tolerant gradient synchronization (RNA) next to blocking allreduce and random-group partial allreduce.",
}

// run is main without the exit, so tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(tool, &CLI{}, args, stdin, stdout, stderr)
}
