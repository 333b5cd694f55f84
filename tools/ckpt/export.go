package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/ckpt/internal/agent"
	"trainwire.dev/tools/ckpt/internal/safetensors"
	"trainwire.dev/tools/ckpt/internal/tier"
)

// ExportCmd is `ckpt export`.
type ExportCmd struct {
	DirFlag
	Iter   int64  `help:"The persisted iteration (-1: the latest)." default:"-1"`
	Rank   int    `help:"Export only this rank's shard (-1: every rank, one file each)." default:"-1"`
	Output string `short:"o" required:"" help:"With --rank: the .safetensors file (- for stdout); else a directory that gets rank-NNNNN.safetensors per rank." type:"path"`
}

// Run writes persisted shards as safetensors files, all or nothing: every
// file is written in a temporary directory inside the output directory and
// moved into place only once all of them are, so a failed or interrupted
// export leaves the output as it was.
func (c *ExportCmd) Run(rio *cli.IO) (err error) {
	m, err := tier.Latest(c.Dir, c.Iter)
	if err != nil {
		return err
	}
	ranks := []int{c.Rank}
	tmp := ""
	if c.Rank < 0 {
		ranks = nil
		for _, s := range m.Shards {
			ranks = append(ranks, s.Rank)
		}
		if _, serr := os.Stat(c.Output); os.IsNotExist(serr) {
			defer func() {
				if err != nil {
					_ = os.Remove(c.Output) // only if empty: what this run created
				}
			}()
		}
		if err := os.MkdirAll(c.Output, 0o755); err != nil {
			return err
		}
		if tmp, err = os.MkdirTemp(c.Output, ".export-tmp-"); err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
	}
	var total int64
	var names []string
	for _, r := range ranks {
		if rio.Ctx.Err() != nil {
			return cli.WithCode(cli.ExitInterrupted, fmt.Errorf("export interrupted; %s left as it was", c.Output))
		}
		data, s, err := tier.ReadShard(c.Dir, m, r)
		if err != nil {
			return fmt.Errorf("%w; nothing exported", err)
		}
		ds, err := shardTensors(data, s.Format)
		if err != nil {
			return fmt.Errorf("rank %d: %w; nothing exported", r, err)
		}
		meta := map[string]string{"format": "pt", "trainwire_ckpt_iter": strconv.FormatInt(m.Iter, 10), "trainwire_ckpt_rank": strconv.Itoa(r),
			"trainwire_ckpt_world": strconv.Itoa(m.World), "trainwire_ckpt_run": m.Run, "trainwire_ckpt_saved_as": s.Format}
		path := c.Output
		if tmp != "" {
			names = append(names, fmt.Sprintf("rank-%05d.safetensors", r))
			path = filepath.Join(tmp, names[len(names)-1])
		}
		if err := writeOut(path, rio.Stdout, func(w io.Writer) error { return safetensors.WriteMeta(w, ds, meta) }); err != nil {
			return err
		}
		total += int64(len(data))
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(tmp, n), filepath.Join(c.Output, n)); err != nil {
			return fmt.Errorf("moving %s into %s: %w", n, c.Output, err)
		}
	}
	fmt.Fprintf(rio.Stderr, "ckpt: exported iteration %d (%d shards, %d bytes) as safetensors to %s\n", m.Iter, len(ranks), total, c.Output)
	return nil
}

// shardTensors returns a shard's tensors: the dense frames of a wire
// shard, the tensors of a safetensors shard, or the bytes of a raw shard
// as one u8 tensor named "state".
func shardTensors(data []byte, format string) ([]*wire.Dense, error) {
	switch format {
	case agent.FormatSafetensors:
		return safetensors.Dense(data)
	case agent.FormatWire:
		return denseFrames(data)
	default:
		return []*wire.Dense{{Name: "state", Rank: -1, DType: "u8", Shape: []int64{int64(len(data))}, Data: data}}, nil
	}
}

// writeOut writes to path atomically (cli.CreateAtomic), or to stdout
// for "-".
func writeOut(path string, stdout io.Writer, fill func(io.Writer) error) error {
	if path == "-" {
		bw := bufio.NewWriterSize(stdout, 1<<20)
		if err := fill(bw); err != nil {
			return err
		}
		return bw.Flush()
	}
	f, err := cli.CreateAtomic(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	bw := bufio.NewWriterSize(f, 1<<20)
	if err := fill(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Commit()
}
