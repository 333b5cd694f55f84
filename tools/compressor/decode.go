package main

import (
	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// DecodeCmd turns compressed frames back into dense f32 frames.
type DecodeCmd struct {
	cli.WireFlags
	Files []string `arg:"" optional:"" help:"Input streams; - or none for stdin." type:"path"`
}

// Run decodes every compressed frame; other frames pass through.
func (c *DecodeCmd) Run(rio *cli.IO) error {
	w := wire.NewWriter(rio.Stdout, rio.Tool+"/"+cli.Version)
	err := cli.EachFrame(c.Files, rio.Stdin, c.Limits(), false, func(f wire.Frame) error {
		cf, ok := f.(*wire.Compressed)
		if !ok {
			return w.Write(f)
		}
		x, err := codec.DecodeLimit(cf, nil, int64(c.MaxPayload))
		if err != nil {
			return err
		}
		d := wire.NewDenseF32(cf.Name, x, cf.Shape...)
		d.Step, d.Rank = cf.Step, cf.Rank
		return w.Write(d)
	})
	if err != nil {
		return err
	}
	return w.Close()
}
