package main

import (
	"errors"
	"fmt"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/tools/ckpt/internal/catalog"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// VerifyCmd is `ckpt verify`.
type VerifyCmd struct {
	DirFlag
	Iter     int64  `help:"Verify only this iteration (-1: every one the catalog names)." default:"-1"`
	Metrics  string `help:"Write Prometheus textfile metrics here." env:"TRAINWIRE_CKPT_VERIFY_METRICS" type:"path"`
	Progress string `help:"Progress bar on stderr: auto, always, never." enum:"auto,always,never" default:"auto"`
}

// Run re-hashes every shard the catalog names.
func (c *VerifyCmd) Run(rio *cli.IO) (err error) {
	start := time.Now()
	var total int64
	defer func() {
		if c.Metrics != "" {
			if merr := writeMetrics(c.Metrics, "verify", start, err == nil, total, c.Iter); merr != nil {
				rio.Log.Warn("could not write the metrics file", "err", merr)
			}
		}
	}()
	cat, err := openCatalog(c.Dir)
	if err != nil {
		return err
	}
	all, err := cat.List()
	cat.Close()
	if err != nil {
		return err
	}
	var size int64
	var sel []*catalog.Manifest
	for _, m := range all {
		if c.Iter < 0 || m.Iter == c.Iter {
			sel = append(sel, m)
			size += m.Bytes
		}
	}
	if c.Iter >= 0 && len(sel) == 0 {
		return fmt.Errorf("the catalog names no iteration %d", c.Iter)
	}
	bar := newBar(rio.Stderr, c.Progress, "verify")
	bar.SetTotal(size)
	var bad []error
	shards := 0
	for _, m := range sel {
		for _, s := range m.Shards {
			base := total
			n, err := tier.CheckShard(c.Dir, s, func(n int64) { bar.Set(base + n) })
			total += n
			shards++
			if err != nil {
				p := tier.Problem{Iter: m.Iter, Rank: s.Rank, File: s.File, Err: err}
				bad = append(bad, p)
				fmt.Fprintf(rio.Stdout, "BAD %s\n", p.Error())
			}
		}
	}
	bar.Done()
	if len(bad) > 0 {
		return fmt.Errorf("%d of %d shards failed verification: %w", len(bad), shards, errors.Join(bad...))
	}
	fmt.Fprintf(rio.Stderr, "ckpt: verified %d iterations, %d shards, %d bytes in %v\n", len(sel), shards, total, time.Since(start).Round(time.Millisecond))
	return nil
}
