package main

import (
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/verbs"
	"trainwire.dev/lib/cli/verbs/check"
)

// CLI is hashsync's command line.
type CLI struct {
	cli.Globals

	Version  cli.VersionCmd `cmd:"" help:"Print the version."`
	Dump     verbs.DumpCmd  `cmd:"" help:"Print any trainwire stream as JSON lines."`
	Check    check.Cmd      `cmd:"" help:"Check the mesh: every rank runs it; times and verifies ring allreduce; rank 0 reports."`
	Env      verbs.EnvCmd   `cmd:"" help:"Print this process's rank, world and master as its launcher set them."`
	Gen      GenCmd         `cmd:"" help:"Write one rank's deterministic sparse-gradient workload (Zipf embedding, Bernoulli pool or top-k model)."`
	Serve    ServeCmd       `cmd:"" help:"Sidecar: join the mesh once and answer a training process's sync requests on a Unix socket, tensors in shared memory (docs/serve.md)."`
	Sync     SyncCmd        `cmd:"" help:"Filter: synchronize this rank's gradient frames with the other ranks (zen or a baseline scheme) and write the sums."`
	Ref      RefCmd         `cmd:"" help:"Write the dense reference sum of N ranks' streams, summed in rank order."`
	AllToAll AllToAllCmd    `cmd:"" name:"alltoall" help:"Filter: alltoall each pair of frames (split sizes, rows) with the other ranks, Sven's asynchronous alltoall or the synchronous baseline (docs/sven.md)."`
	Place    PlaceCmd       `cmd:"" help:"Plan where embedding tables live: Sven's static placement (row-wise splits, memory and lookup load balanced) against round-robin and size-greedy; or --check a plan (docs/sven.md)."`
	Model    ModelCmd       `cmd:"" help:"Print the closed-form communication volume of every scheme, and Zen's choice between Eq. (1) and Eq. (2)."`
}

var tool = cli.Tool{
	Name:        "hashsync",
	Description: "hashsync: synchronize sparse gradients among ranks with Zen's balanced parallelism (hierarchical hashing, hash bitmap) and the baseline schemes.",
}

// run is main without the exit, so tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(tool, &CLI{}, args, stdin, stdout, stderr)
}
