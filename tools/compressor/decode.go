package main

import (
	"fmt"
	"slices"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// DecodeCmd turns compressed frames back into dense f32 frames.
type DecodeCmd struct {
	cli.WireFlags
	Join  bool     `help:"Put the chunks of partitioned tensors (encode --parts) back together: one dense frame per tensor, with its own name and shape, written when its last chunk is in. Without it each chunk decodes to a dense frame of its own (NAME[c/P])." env:"TRAINWIRE_COMPRESSOR_JOIN"`
	Files []string `arg:"" optional:"" help:"Input streams; - or none for stdin." type:"path"`
}

// pending is a partitioned tensor being joined.
type pending struct {
	info  codec.PartInfo
	step  int64
	rank  int64
	data  []float32
	seen  []bool
	count int
	first int64 // frame index of its first chunk
}

// Run decodes every compressed frame as soon as it is read (with --join,
// every tensor as soon as its last chunk is); other frames (step ends
// included) pass through. A step's end completes its tensors: one still
// missing chunks then is an error.
func (c *DecodeCmd) Run(rio *cli.IO) error {
	w := wire.NewWriter(rio.Stdout, rio.Tool+"/"+cli.Version)
	open := map[string]*pending{}
	var held int64 // bytes of the tensors in open
	var index int64 = -1
	filter := cli.StepFilter{Out: w, Step: func(s *wire.StepEnd) error {
		return incomplete(open, fmt.Sprintf("step %d ended", s.Step))
	}}
	filter.Frame = func(f wire.Frame) error {
		index++
		cf, ok := f.(*wire.Compressed)
		if !ok {
			return w.Write(f)
		}
		var info codec.PartInfo
		if c.Join {
			var part bool
			var err error
			if info, part, err = codec.PartOf(cf); err != nil {
				return cli.WithCode(cli.ExitBadInput, fmt.Errorf("frame %d: %w", index, err))
			}
			if !part {
				return cli.WithCode(cli.ExitBadInput, fmt.Errorf("frame %d: tensor %q is not partitioned (--join wants the chunks of encode --parts)", index, cf.Name))
			}
		}
		x, err := codec.DecodeLimit(cf, nil, int64(c.MaxPayload))
		if err != nil {
			return err
		}
		if !c.Join {
			d := wire.NewDenseF32(cf.Name, x, cf.Shape...)
			d.Step, d.Rank = cf.Step, cf.Rank
			return w.Write(d)
		}
		key := fmt.Sprintf("%s\x00%d\x00%d", info.Base, cf.Step, cf.Rank)
		p := open[key]
		if p == nil {
			// Every tensor being joined is held whole until its last
			// chunk: all of them together stay within --max-payload.
			if held+4*info.Numel > int64(c.MaxPayload) {
				return cli.WithCode(cli.ExitBadInput, fmt.Errorf("frame %d: tensor %q of shape %v: %d bytes held for joining with the %d of %d incomplete tensor(s), over the %d-byte limit (--max-payload)",
					index, info.Base, info.Shape, 4*info.Numel, held, len(open), c.MaxPayload))
			}
			held += 4 * info.Numel
			p = &pending{info: info, step: cf.Step, rank: cf.Rank, data: make([]float32, info.Numel), seen: make([]bool, info.Parts), first: index}
			open[key] = p
		}
		if info.Parts != p.info.Parts || !slices.Equal(info.Shape, p.info.Shape) {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("frame %d: chunk %d/%d of %q (shape %v) does not match its first chunk (frame %d: %d parts, shape %v)",
				index, info.Part, info.Parts, info.Base, info.Shape, p.first, p.info.Parts, p.info.Shape))
		}
		if p.seen[info.Part] {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("frame %d: chunk %d/%d of %q (step %d, rank %d) twice", index, info.Part, info.Parts, info.Base, cf.Step, cf.Rank))
		}
		if err := codec.Join(p.data, info, x); err != nil {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("frame %d: %w", index, err))
		}
		p.seen[info.Part] = true
		p.count++
		if p.count < info.Parts {
			return nil
		}
		delete(open, key)
		held -= 4 * info.Numel
		d := wire.NewDenseF32(info.Base, p.data, info.Shape...)
		d.Step, d.Rank = p.step, p.rank
		return w.Write(d)
	}
	if err := filter.Run(c.Files, rio.Stdin, c.Limits()); err != nil {
		return err
	}
	if err := incomplete(open, "input ended"); err != nil {
		return err
	}
	return w.Close()
}

// incomplete is the error for the tensors still being joined when they
// should all be complete (when the input or a step ended), nil if none.
func incomplete(open map[string]*pending, when string) error {
	if len(open) == 0 {
		return nil
	}
	var miss []string
	for _, p := range open {
		var lack []string
		for k, ok := range p.seen {
			if !ok {
				lack = append(lack, fmt.Sprint(k))
			}
		}
		miss = append(miss, fmt.Sprintf("%q step %d rank %d (first chunk at frame %d) lacks chunks %s of %d",
			p.info.Base, p.step, p.rank, p.first, strings.Join(lack, ","), p.info.Parts))
	}
	slices.Sort(miss)
	return cli.WithCode(cli.ExitBadInput, fmt.Errorf("decode --join: %s with %d incomplete tensor(s): %s", when, len(open), strings.Join(miss, "; ")))
}
