package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/zeebo/xxh3"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
	"trainwire.dev/tools/ckpt/internal/safetensors"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// ImportCmd is `ckpt import`.
type ImportCmd struct {
	DirFlag
	Iter  int64         `required:"" help:"The iteration to record the files as."`
	Files []string      `arg:"" help:"One safetensors file per rank, in rank order (e.g. from ckpt export or a PyTorch/HF tool)." type:"existingfile"`
	RunID string        `name:"run-id" help:"Run id recorded in the catalog." default:"imported"`
	Tag   []string      `help:"Retention tags recorded in the catalog."`
	Wait  time.Duration `help:"Wait this long for the persistent directory's lock." default:"60s"`
}

// fileSource makes safetensors files a persist Source: rank r's shard is
// Files[r], checked by the strict parser.
type fileSource struct {
	files []string
	iter  int64
}

func (f *fileSource) World() int { return len(f.files) }

func (f *fileSource) Latest(context.Context) (int64, [][]int, error) {
	return f.iter, tier.OwnHolders(len(f.files)), nil
}

func (f *fileSource) Fetch(_ context.Context, _, owner int, _ int64, w io.Writer, progress func(int64)) (tier.Fetched, error) {
	data, err := os.ReadFile(f.files[owner])
	if err != nil {
		return tier.Fetched{}, err
	}
	if _, err := safetensors.Parse(data); err != nil {
		return tier.Fetched{}, cli.WithCode(cli.ExitBadInput, fmt.Errorf("%s: %w", f.files[owner], err))
	}
	if _, err := w.Write(data); err != nil {
		return tier.Fetched{}, err
	}
	if progress != nil {
		progress(int64(len(data)))
	}
	return tier.Fetched{Len: int64(len(data)), XXH3: xxh3.Hash(data), CRC32C: wire.CRC32C(data), Format: agent.FormatSafetensors}, nil
}

// Run records the files as a persisted iteration.
func (c *ImportCmd) Run(rio *cli.IO) error {
	if c.Iter < 0 {
		return cli.WithCode(cli.ExitUsage, errors.New("--iter must be ≥ 0"))
	}
	unlock, err := lockDir(c.Dir, c.Wait, "import")
	if err != nil {
		return err
	}
	defer unlock()
	if m, err := tier.Latest(c.Dir, c.Iter); err == nil && m != nil {
		return fmt.Errorf("iteration %d is already in the catalog of %s; prune it first or pick another --iter", c.Iter, c.Dir)
	}
	res, err := tier.Persist(rio.Ctx, c.Dir, &fileSource{files: c.Files, iter: c.Iter}, tier.Options{Run: c.RunID, Tags: c.Tag})
	if err != nil {
		return err
	}
	fmt.Fprintf(rio.Stderr, "ckpt: imported %d safetensors files as iteration %d (%d bytes) into %s\n", res.Shards, res.Iter, res.Bytes, c.Dir)
	return nil
}
