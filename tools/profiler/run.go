package main

import (
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/verbs"
)

// CLI is profiler's command line.
type CLI struct {
	cli.Globals

	Version cli.VersionCmd `cmd:"" help:"Print the version."`
	Dump    verbs.DumpCmd  `cmd:"" help:"Print any trainwire stream as JSON lines."`
	Ingest  IngestCmd      `cmd:"" help:"Stream traces of every vintage into normalized event frames."`
	Summary SummaryCmd     `cmd:"" help:"HTA-grade analyses: temporal breakdown, overlap, idle split, kernels, launches, collectives, stragglers, memory."`
	Model   ModelCmd       `cmd:"" help:"Write the timing model the planners read (from traces, or --builtin)."`
	Plot    PlotCmd        `cmd:"" help:"Draw a Gantt timeline per rank and lane (PNG or SVG)."`
	Convert ConvertCmd     `cmd:"" help:"Convert traces to a Perfetto-loadable trace."`
}

var tool = cli.Tool{
	Name:        "profiler",
	Description: "profiler: read training traces of every vintage (Kineto, legacy autograd profiler, Horovod, BytePS), analyse them like Holistic Trace Analysis, and emit the timing model the planners read.",
}

// run is main without the exit, so tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(tool, &CLI{}, args, stdin, stdout, stderr)
}
