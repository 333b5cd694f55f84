package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
	"trainwire.dev/tools/ckpt/internal/agent"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// PersistCmd is `ckpt persist`.
type PersistCmd struct {
	launch.Flags `embed:""`
	DirFlag
	Peers    []string      `required:"" help:"Every rank's agent address host:port, in rank order (as given to the agents)." env:"TRAINWIRE_CKPT_PEERS"`
	Token    string        `help:"The job token the agents share; prefer the env var." env:"TRAINWIRE_TOKEN"`
	M        int           `name:"m" help:"Replicas per checkpoint, as given to the agents (orders the holders tried)." default:"2" env:"TRAINWIRE_CKPT_REPLICAS"`
	Timeout  time.Duration `help:"Deadline for every connect, read and write to an agent." default:"30s" env:"TRAINWIRE_TIMEOUT"`
	Wait     time.Duration `help:"Wait this long for the lock if another persist or prune holds it (0: skip this run at once, exit 75)." default:"0s"`
	Tag      []string      `help:"Retention tags recorded in the catalog (pin: prune never removes it)."`
	Rate     string        `help:"Cap the write rate (e.g. 200MB per second) to spare a shared file system; none: no cap." default:"none" env:"TRAINWIRE_CKPT_PERSIST_RATE"`
	Metrics  string        `help:"Write Prometheus textfile metrics here (node_exporter's textfile collector): last success, duration, bytes." env:"TRAINWIRE_CKPT_METRICS" type:"path"`
	Progress string        `help:"Progress bar on stderr: auto (when stderr is a terminal), always, never." enum:"auto,always,never" default:"auto"`
}

// Run persists the latest committed checkpoint.
func (c *PersistCmd) Run(rio *cli.IO) (err error) {
	start := time.Now()
	var res tier.Result
	skipped := false
	defer func() {
		if c.Metrics != "" && !skipped {
			if merr := writeMetrics(c.Metrics, "persist", start, err == nil, res.Bytes, res.Iter); merr != nil {
				rio.Log.Warn("could not write the metrics file", "path", c.Metrics, "err", merr)
			}
		}
	}()
	env, err := c.Flags.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	run := env.RunID
	if run == "" {
		run = "default"
	}
	var rate float64
	if c.Rate != "none" && c.Rate != "" {
		if rate, err = parseRate(c.Rate); err != nil {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("--rate: %w", err))
		}
	}
	unlock, err := lockDir(c.Dir, c.Wait, "persist")
	if errors.Is(err, tier.ErrBusy) {
		skipped = true // the lock holder writes the metrics
	}
	if err != nil {
		return err
	}
	defer unlock()
	rem, err := agent.NewRemote(c.Peers, []byte(c.Token), run, c.M, c.Timeout)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	bar := newBar(rio.Stderr, c.Progress, "persist")
	res, err = tier.Persist(rio.Ctx, c.Dir, rem, tier.Options{Run: run, Tags: c.Tag, Rate: rate, Progress: bar.Set})
	bar.Done()
	if errors.Is(err, tier.ErrUnavailable) {
		return cli.WithCode(cli.ExitPeer, err)
	}
	if err != nil {
		return err // the persistent directory: exit 1, the checkpoint is still in memory
	}
	if res.Skipped {
		fmt.Fprintf(rio.Stderr, "ckpt: iteration %d is already persisted in %s; nothing to do\n", res.Iter, c.Dir)
		return nil
	}
	d := time.Since(start)
	fmt.Fprintf(rio.Stderr, "ckpt: persisted iteration %d (%d shards, %d bytes) to %s in %v (%.1f MB/s)\n",
		res.Iter, res.Shards, res.Bytes, c.Dir, d.Round(time.Millisecond), float64(res.Bytes)/1e6/d.Seconds())
	return nil
}
