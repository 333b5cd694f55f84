package main

import (
	"fmt"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// SumCmd adds compressed frames without decoding.
type SumCmd struct {
	cli.WireFlags
	Average bool     `help:"Divide each sum by the number of frames added (once, in f32, before rounding to the codec's type); majority votes are unchanged." env:"TRAINWIRE_COMPRESSOR_AVERAGE"`
	Files   []string `arg:"" optional:"" help:"Input streams (e.g. one per rank); - or none for stdin." type:"path"`
}

// Run groups the compressed frames of every input by tensor name and
// writes one sum per name, in order of first appearance.
func (c *SumCmd) Run(rio *cli.IO) error {
	var order []string
	groups := map[string][]*wire.Compressed{}
	err := cli.EachFrame(c.Files, rio.Stdin, c.Limits(), false, func(f wire.Frame) error {
		cf, ok := f.(*wire.Compressed)
		if !ok {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("sum: %s frame, want compressed", f.Type()))
		}
		if _, ok := groups[cf.Name]; !ok {
			order = append(order, cf.Name)
		}
		groups[cf.Name] = append(groups[cf.Name], cf)
		return nil
	})
	if err != nil {
		return err
	}
	w := wire.NewWriter(rio.Stdout, rio.Tool+"/"+cli.Version)
	for _, name := range order {
		out, err := codec.SumWith(groups[name], codec.SumOptions{Average: c.Average})
		if err != nil {
			return cli.WithCode(cli.ExitBadInput, err)
		}
		if err := w.Write(out); err != nil {
			return err
		}
	}
	return w.Close()
}
