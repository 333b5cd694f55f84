package main

import (
	"fmt"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// PruneCmd is `ckpt prune`.
type PruneCmd struct {
	DirFlag
	Keep      int           `required:"" help:"Keep the N newest persisted iterations."`
	KeepEvery int64         `help:"Also keep every iteration divisible by K (0: none)." default:"0"`
	Wait      time.Duration `help:"Wait this long for the lock if another persist or prune holds it (0: skip this run at once, exit 75)." default:"0s"`
	DryRun    bool          `help:"Say what would be removed; remove nothing."`
}

// Run removes catalog entries first (one synced batch), then their files.
func (c *PruneCmd) Run(rio *cli.IO) error {
	if c.Keep < 1 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("--keep %d: keep at least the newest iteration", c.Keep))
	}
	unlock, err := lockDir(c.Dir, c.Wait, "prune")
	if err != nil {
		return err
	}
	defer unlock()
	cat, err := openCatalog(c.Dir)
	if err != nil {
		return err
	}
	defer cat.Close()
	all, err := cat.List()
	if err != nil {
		return err
	}
	keep := tier.Keep(all, c.Keep, c.KeepEvery)
	var drop []int64
	for _, m := range all {
		if !keep[m.Iter] {
			drop = append(drop, m.Iter)
		}
	}
	for _, it := range drop {
		fmt.Fprintf(rio.Stdout, "prune %d\n", it)
	}
	if c.DryRun {
		return nil
	}
	if err := cat.Delete(drop...); err != nil {
		return err
	}
	named := map[int64]bool{}
	for it := range keep {
		named[it] = true
	}
	gone, err := tier.Cleanup(c.Dir, named, true)
	if err != nil {
		return err
	}
	fmt.Fprintf(rio.Stderr, "ckpt: pruned %d iterations (kept %d); removed %d directories\n", len(drop), len(all)-len(drop), len(gone))
	return nil
}
