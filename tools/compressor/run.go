package main

import (
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/verbs"
)

// CLI is compressor's command line.
type CLI struct {
	cli.Globals

	Version cli.VersionCmd `cmd:"" help:"Print the version."`
	Dump    verbs.DumpCmd  `cmd:"" help:"Print any trainwire stream as JSON lines."`
	Encode  EncodeCmd      `cmd:"" help:"Compress dense f32 tensor frames into compressed frames, with error feedback per tensor name."`
	Decode  DecodeCmd      `cmd:"" help:"Decompress compressed frames back into dense f32 frames."`
	List    ListCmd        `cmd:"" help:"List every algorithm: parameters, defaults, output size and summability."`
	Sum     SumCmd         `cmd:"" help:"Add compressed frames of the same tensor without decoding them (summable codecs)."`
	Bench   BenchCmd       `cmd:"" help:"Measure encode/decode throughput and output/input ratio per algorithm and size, as stats frames."`
	Sync    SyncCmd        `cmd:"" help:"Filter: synchronize this rank's gradient frames with the other ranks, each compressed with error feedback and exchanged by a compressed collective (or as a plan says), and write the sums."`
	Serve   ServeCmd       `cmd:"" help:"Sidecar: join the mesh once and answer a training process's sync requests on a Unix socket, tensors in shared memory, with sync's compressed collectives and error feedback kept per tensor (docs/serve.md)."`
	Plan    PlanCmd        `cmd:"" help:"Espresso's compression-strategy planner: one option per gradient (compress or not, GPU or CPU, which collectives) for the least predicted iteration time."`
}

var tool = cli.Tool{
	Name:        "compressor",
	Description: "compressor: gradient-compression codecs with error feedback, and Espresso's compression-strategy planner.",
}

// run is main without the exit, so tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(tool, &CLI{}, args, stdin, stdout, stderr)
}
