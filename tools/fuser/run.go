package main

import (
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/verbs"
)

// CLI is fuser's command line.
type CLI struct {
	cli.Globals

	Version cli.VersionCmd `cmd:"" help:"Print the version."`
	Dump    verbs.DumpCmd  `cmd:"" help:"Print any trainwire stream as JSON lines."`
	Plan    PlanCmd        `cmd:"" help:"Find the fusion plan with the least predicted iteration time, against bucket and even-split baselines."`
	Eval    EvalCmd        `cmd:"" help:"Predict the iteration time and timeline of a given plan."`
}

var tool = cli.Tool{
	Name:        "fuser",
	Description: "fuser: plan which consecutive gradients to fuse before compression and communication (Cupcake), against bucket baselines.",
}

// run is main without the exit, so tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(tool, &CLI{}, args, stdin, stdout, stderr)
}
