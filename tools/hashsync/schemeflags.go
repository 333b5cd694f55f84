package main

import (
	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"

	"trainwire.dev/tools/hashsync/internal/scheme"
)

// SchemeFlags choose the sync scheme and its parameters; `sync` and
// `serve` share them (every rank must give the same).
type SchemeFlags struct {
	Scheme       string       `help:"zen, bp-coo, agsparse, sparcml, sparse-ps, omnireduce, hitopk, dense or auto." enum:"zen,bp-coo,agsparse,sparcml,sparse-ps,omnireduce,hitopk,dense,auto" default:"zen" env:"TRAINWIRE_SCHEME"`
	Seed         uint32       `help:"Hash seed shared by all ranks (h0 and h1..hk derive from it)." default:"0" env:"TRAINWIRE_SEED"`
	K            int          `help:"Second-level hash functions of Algorithm 1." default:"3" env:"TRAINWIRE_HASH_K"`
	R1Factor     float64      `name:"r1-factor" help:"Parallel memory: r1 = ceil(R1FACTOR·nnz/n) slots per partition." default:"2" env:"TRAINWIRE_R1_FACTOR"`
	R2Fraction   float64      `name:"r2-fraction" help:"Serial memory: r2 = ceil(R2FRACTION·r1) slots per partition." default:"0.1" env:"TRAINWIRE_R2_FRACTION"`
	Partitioner  string       `help:"auto (bucket on the CPU, hash with --device), hash (Algorithm 1, compare-and-swap; its serial-write statistics) or bucket (counting sort: the same sets, each in ascending row order, which the gathers and the servers' lookups then read in order)." enum:"auto,hash,bucket" default:"auto" env:"TRAINWIRE_PARTITIONER"`
	Pull         string       `help:"zen's pull encoding: auto (smaller of hash bitmap and COO, per message), bitmap or coo." enum:"auto,bitmap,coo" default:"auto" env:"TRAINWIRE_PULL"`
	Block        int          `help:"omnireduce block size, in elements." default:"256" env:"TRAINWIRE_BLOCK"`
	Rho          float64      `help:"hitopk density per segment (0: every non-zero row, lossless)." default:"0" env:"TRAINWIRE_RHO"`
	LocalSize    int          `help:"hitopk ranks per node (0: the launcher's local world size when it reports several nodes, else 1)." default:"0" env:"TRAINWIRE_HITOPK_LOCAL"`
	ProfileIters int          `help:"auto: iterations profiled (with zen, timed) before applying Zen's rule (Eq. (1) vs Eq. (2))." default:"3" env:"TRAINWIRE_PROFILE_ITERS"`
	AutoTrials   int          `name:"auto-trials" help:"auto: iterations it then times sparcml (world a power of two) before keeping the faster of zen and sparcml, by the slowest rank's median; 0 keeps the rule's choice." default:"2"`
	Workers      int          `help:"Hashing goroutines (0: GOMAXPROCS)." default:"0" env:"TRAINWIRE_WORKERS"`
	RowWidth     int          `help:"Row width for dense frames (0: their last dimension; 1: element-level)." default:"0" env:"TRAINWIRE_ROW_WIDTH"`
	MaxMessage   cli.ByteSize `help:"Largest message accepted from a peer." default:"16GiB" env:"TRAINWIRE_MAX_MESSAGE"`
}

// config is the scheme configuration the flags describe for env (without
// averaging), checked for its world.
func (c *SchemeFlags) config(env launch.Env) (scheme.Config, error) {
	cfg := scheme.DefaultConfig(c.Scheme)
	cfg.Seed, cfg.K, cfg.C, cfg.R2 = c.Seed, c.K, c.R1Factor, c.R2Fraction
	cfg.Partitioner, cfg.Pull, cfg.Block, cfg.Rho, cfg.ProfileIters, cfg.Workers = c.Partitioner, c.Pull, c.Block, c.Rho, c.ProfileIters, c.Workers
	if cfg.Partitioner == "auto" {
		cfg.Partitioner = "bucket" // SyncCmd.Run makes it hash for a GPU
	}
	cfg.Trials = c.AutoTrials
	cfg.MaxMessage = int64(c.MaxMessage)
	cfg.LocalSize = c.LocalSize
	if cfg.LocalSize == 0 {
		// The launcher's ranks per node, when it knows of several nodes.
		cfg.LocalSize = 1
		if env.NumNodes > 1 && env.LocalWorld > 1 && env.World%env.LocalWorld == 0 {
			cfg.LocalSize = env.LocalWorld
		}
	}
	return cfg, cfg.Check(env.World)
}
