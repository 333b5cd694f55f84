package main

import (
	"io"

	"trainwire.dev/lib/cli"
)

// CLI is straggle's command line.
type CLI struct {
	cli.Globals

	Version cli.VersionCmd `cmd:"" help:"Print the version."`
	Dump    cli.DumpCmd    `cmd:"" help:"Print any trainwire stream as JSON lines."`
	Check   cli.CheckCmd   `cmd:"" help:"Check the mesh: every rank runs it; times and verifies ring allreduce; rank 0 reports."`
	Env     cli.EnvCmd     `cmd:"" help:"Print this process's rank, world and master as its launcher set them."`
}

var tool = cli.Tool{
	Name:        "straggle",
	Description: "straggle: straggler-tolerant gradient synchronization (RNA) next to blocking allreduce and random-group partial allreduce.",
}

// run is main without the exit, so tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(tool, &CLI{}, args, stdin, stdout, stderr)
}
