package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/catalog"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// lockDir takes the persistent directory's writer lock for verb, waiting
// up to wait. When another run holds it past that, the error exits
// cli.ExitSkipped (75), which cron scripts tell from success and from
// failure.
func lockDir(dir string, wait time.Duration, verb string) (func(), error) {
	unlock, err := tier.Lock(dir, wait)
	if errors.Is(err, tier.ErrBusy) {
		return nil, cli.WithCode(cli.ExitSkipped, fmt.Errorf("skipped: %w in %s; this %s did nothing (exit %d: try again later, or give --wait)", err, dir, verb, cli.ExitSkipped))
	}
	return unlock, err
}

func openCatalog(dir string) (*catalog.Catalog, error) {
	if _, err := os.Stat(filepath.Join(dir, "catalog")); err != nil {
		return nil, fmt.Errorf("%s holds no ckpt catalog (run `ckpt persist --dir %s` first)", dir, dir)
	}
	return catalog.Open(dir, tier.CatalogWait)
}

// denseFrames reads the dense frames of a trainwire stream held in data.
func denseFrames(data []byte) ([]*wire.Dense, error) {
	r := wire.NewReader(bytes.NewReader(data), wire.Limits{MaxPayload: int64(len(data)) + 1})
	var ds []*wire.Dense
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return ds, nil
		}
		if err != nil {
			return nil, cli.WithCode(cli.ExitBadInput, err)
		}
		d, ok := f.(*wire.Dense)
		if !ok {
			return nil, cli.WithCode(cli.ExitBadInput, fmt.Errorf("the checkpoint holds a %s frame; safetensors holds dense tensors only", f.Type()))
		}
		ds = append(ds, d)
	}
}
