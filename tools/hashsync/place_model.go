package main

import (
	"fmt"
	"regexp"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"

	"trainwire.dev/tools/hashsync/internal/place"
)

// modelTables reads the tables of --model: the gradients of every model
// frame whose names match --model-match, cut into rows of --model-dim.
func (c *PlaceCmd) modelTables(rio *cli.IO) ([]place.Table, error) {
	re, err := regexp.Compile(c.ModelMatch)
	if err != nil {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("place: --model-match: %w", err))
	}
	if c.ModelDim < 1 {
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("place: --model needs --model-dim ≥ 1 (the tables' embedding dimension)"))
	}
	r := &modelReader{re: re, dim: c.ModelDim}
	if err := cli.EachFrame(c.Model, rio.Stdin, c.Limits(), false, r.frame); err != nil {
		return nil, err
	}
	if r.models == 0 {
		return nil, cli.WithCode(cli.ExitBadInput, fmt.Errorf("place: --model: no model frame in %d frames", r.frames))
	}
	if len(r.tables) == 0 {
		return nil, cli.WithCode(cli.ExitBadInput, fmt.Errorf("place: --model: no gradient matches --model-match %q", c.ModelMatch))
	}
	return r.tables, nil
}

// modelReader collects the embedding tables of model frames.
type modelReader struct {
	re             *regexp.Regexp
	dim            int64
	tables         []place.Table
	frames, models int
}

func (r *modelReader) frame(f wire.Frame) error {
	r.frames++
	m, ok := f.(*wire.Model)
	if !ok {
		return nil // a model stream may carry other frames (stats)
	}
	r.models++
	for i, g := range m.Grads {
		if !r.re.MatchString(g.Name) {
			continue
		}
		bad := func(why string, a ...any) error {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("place: --model: data frame %d, grads[%d] (%q): %s", r.frames, i, g.Name, fmt.Sprintf(why, a...)))
		}
		switch {
		case g.Numel < 1 || g.Numel%r.dim != 0:
			return bad("%d elements are not rows of %d (--model-dim)", g.Numel, r.dim)
		case g.Bytes < g.Numel || g.Bytes%g.Numel != 0:
			return bad("%d bytes for %d elements", g.Bytes, g.Numel)
		}
		r.tables = append(r.tables, place.Table{Name: strings.TrimSuffix(g.Name, ".weight"), Rows: g.Numel / r.dim,
			Dim: r.dim, ElemBytes: g.Bytes / g.Numel, Load: 1})
	}
	return nil
}
