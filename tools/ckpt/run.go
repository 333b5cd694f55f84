package main

import (
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/verbs"
	"trainwire.dev/lib/cli/verbs/check"
)

// CLI is ckpt's command line.
type CLI struct {
	cli.Globals

	Version  cli.VersionCmd `cmd:"" help:"Print the version."`
	Dump     verbs.DumpCmd  `cmd:"" help:"Print any trainwire stream as JSON lines."`
	Check    check.Cmd      `cmd:"" help:"Check the mesh: every rank runs it; times and verifies ring allreduce; rank 0 reports."`
	Env      verbs.EnvCmd   `cmd:"" help:"Print this process's rank, world and master as its launcher set them."`
	Agent    AgentCmd       `cmd:"" help:"Run this rank's agent: hold checkpoint replicas in memory, replicate to peers (Algorithm 6.1), serve the trainer and restores."`
	Save     SaveCmd        `cmd:"" help:"Hand this rank's state (frames, safetensors, raw, or a shared-memory file) to the local agent."`
	Restore  RestoreCmd     `cmd:"" help:"Get this rank's state back: latest committed iteration (or --iter), from local memory, else a peer's."`
	Status   StatusCmd      `cmd:"" help:"Show the local agent's committed iteration, the versions it holds, and its counters."`
	Persist  PersistCmd     `cmd:"" help:"Write the latest committed checkpoint of every rank to a persistent directory and publish it in the pebble catalog (safe from cron)."`
	Ls       LsCmd          `cmd:"" help:"List the checkpoints the persistent catalog names."`
	Verify   VerifyCmd      `cmd:"" help:"Re-hash every persisted shard against the catalog (length, CRC32C, XXH3); exit 1 naming each bad shard."`
	Prune    PruneCmd       `cmd:"" help:"Remove persisted checkpoints: keep the N newest and every K-th (catalog first, then files)."`
	Catalog  CatalogCmd     `cmd:"" help:"Maintain the persistent catalog: rebuild it from the iteration directories (after corruption)."`
	Export   ExportCmd      `cmd:"" help:"Write a persisted checkpoint as safetensors files (one per rank) that PyTorch and Hugging Face tools read."`
	Import   ImportCmd      `cmd:"" help:"Record safetensors files (one per rank) as a persisted iteration, restorable with restore --from persistent."`
	Health   HealthCmd      `cmd:"" help:"Show the etcd view: the root agent, the agents whose heartbeat is alive, the recovery decisions."`
	Plan     PlanCmd        `cmd:"" help:"Placement groups by Gemini's Algorithm 6.1 (group, mixed with a ring) for N machines and m replicas."`
	Prob     ProbCmd        `cmd:"" help:"Probability of recovering from CPU memory after k simultaneous failures: Corollary 6.1, exact, enumerated, ring."`
	Wasted   WastedCmd      `cmd:"" help:"Wasted time per failure (Eq. 6.1, checking Eq. 6.2), HighFreq's interval, effective training time."`
	Schedule ScheduleCmd    `cmd:"" help:"Cut the remote replicas into chunks placed in the network's idle spans (Algorithm 6.2, fixed)."`
}

var tool = cli.Tool{
	Name:        "ckpt",
	Description: "ckpt: keep checkpoints in peers' CPU memory with Gemini's placement, persist and prune them from cron, and recover.",
}

// run is main without the exit, so tests can call it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Run(tool, &CLI{}, args, stdin, stdout, stderr)
}
