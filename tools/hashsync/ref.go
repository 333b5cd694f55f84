package main

import (
	"errors"
	"fmt"
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"

	"trainwire.dev/tools/hashsync/internal/scheme"
)

// RefCmd sums N ranks' streams densely, in rank order.
type RefCmd struct {
	cli.WireFlags
	Files    []string `arg:"" help:"One stream per rank, in rank order (the first is rank 0; - is stdin)."`
	Average  bool     `help:"Divide the sum by the number of ranks."`
	RowWidth int      `help:"Row width for dense frames (0: their last dimension)." default:"0"`
}

// Run writes the reference sum of every tensor, in the form of rank 0's
// frames.
func (c *RefCmd) Run(rio *cli.IO) error {
	if len(c.Files) == 0 {
		return cli.WithCode(cli.ExitUsage, errors.New("ref: name one stream per rank"))
	}
	readers := make([]*wire.Reader, len(c.Files))
	for i, name := range c.Files {
		in, closeIn, err := cli.OpenInput(name, rio.Stdin)
		if err != nil {
			return err
		}
		defer closeIn()
		readers[i] = wire.NewReader(in, c.Limits())
	}
	w := wire.NewWriter(rio.Stdout, "hashsync ref")
	for k := 0; ; k++ {
		ts := make([]*scheme.Tensor, len(readers))
		var fm form
		ended := 0
		for r, rd := range readers {
			f, err := rd.Next()
			if err == io.EOF {
				ended++
				continue
			}
			if err != nil {
				return cli.WithCode(cli.ExitBadInput, fmt.Errorf("ref: %s (rank %d): %w", c.Files[r], r, err))
			}
			t, f0, err := toTensor(f, c.RowWidth)
			if err != nil {
				return cli.WithCode(cli.ExitBadInput, fmt.Errorf("ref: %s (rank %d), tensor #%d: %w", c.Files[r], r, k, err))
			}
			if r == 0 {
				fm = f0
			}
			ts[r] = t
		}
		if ended == len(readers) {
			break
		}
		if ended > 0 {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("ref: the streams have different numbers of tensors: %d of %d end before tensor #%d", ended, len(readers), k))
		}
		sum, err := scheme.Reference(ts)
		if err != nil {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("ref: tensor #%d: %w", k, err))
		}
		if c.Average {
			sum.Scale(1 / float32(len(ts)))
		}
		if err := w.Write(toFrame(sum, fm, -1)); err != nil {
			return err
		}
	}
	return w.Close()
}
