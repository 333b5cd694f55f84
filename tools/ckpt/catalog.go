package main

import (
	"errors"
	"fmt"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// CatalogCmd is `ckpt catalog`: maintenance of the persistent tier's
// catalog.
type CatalogCmd struct {
	Rebuild CatalogRebuildCmd `cmd:"" help:"Rebuild the catalog from the iteration directories (their manifest.json and shard files), e.g. after it was reported corrupt; the old catalog is kept aside, bad directories are renamed quarantine-iter-…"`
}

// CatalogRebuildCmd is `ckpt catalog rebuild`.
type CatalogRebuildCmd struct {
	DirFlag
	Quick    bool          `help:"Check only each shard file's length against its manifest, not its CRC32C and XXH3 (faster; run verify later)."`
	Wait     time.Duration `help:"Wait this long for the lock if another persist or prune holds it (0: skip at once, exit 75)." default:"60s"`
	Progress string        `help:"Progress bar on stderr: auto, always, never." enum:"auto,always,never" default:"auto"`
}

// Run rebuilds the catalog; it exits 1 when some iteration directory had
// to be left out (named, on stdout and in the error).
func (c *CatalogRebuildCmd) Run(rio *cli.IO) error {
	start := time.Now()
	unlock, err := lockDir(c.Dir, c.Wait, "rebuild")
	if err != nil {
		return err
	}
	defer unlock()
	bar := newBar(rio.Stderr, c.Progress, "rebuild")
	res, err := tier.Rebuild(rio.Ctx, c.Dir, tier.RebuildOptions{Rehash: !c.Quick, Format: detectBytes, Progress: bar.Set})
	bar.Done()
	if err != nil {
		return fmt.Errorf("rebuilding the catalog of %s: %w (the previous catalog, if any, is untouched)", c.Dir, err)
	}
	fromShards := map[int64]bool{}
	for _, it := range res.FromShards {
		fromShards[it] = true
	}
	for _, m := range res.Published {
		note := ""
		if fromShards[m.Iter] {
			note = " (no manifest.json, an older ckpt's: entry taken from the shard files; run id and tags unknown)"
		}
		fmt.Fprintf(rio.Stdout, "iteration %d: %d shards, %d bytes%s\n", m.Iter, len(m.Shards), m.Bytes, note)
	}
	var left []error
	for _, p := range res.Left {
		left = append(left, p)
		fmt.Fprintf(rio.Stdout, "LEFT OUT iteration %d, moved to %s: %v\n", p.Iter, p.File, p.Err)
	}
	if res.Old != "" {
		why := "it could be read"
		if res.OldErr != nil {
			why = res.OldErr.Error()
		}
		fmt.Fprintf(rio.Stderr, "ckpt: the previous catalog is kept as %s (%s); remove it when you no longer need it\n", res.Old, why)
	}
	fmt.Fprintf(rio.Stderr, "ckpt: rebuilt the catalog of %s with %d iterations in %v\n", c.Dir, len(res.Published), time.Since(start).Round(time.Millisecond))
	if len(left) > 0 {
		return fmt.Errorf("%d iteration directories left out of the catalog, kept on disk as %s…: %w", len(left), tier.Quarantine, errors.Join(left...))
	}
	return nil
}
