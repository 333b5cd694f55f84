package main

import (
	"errors"
	"fmt"
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// SumCmd adds compressed frames without decoding.
type SumCmd struct {
	cli.WireFlags
	Average bool     `help:"Divide each sum by the number of frames added (once, in f32, before rounding to the codec's type); majority votes are unchanged." env:"TRAINWIRE_COMPRESSOR_AVERAGE"`
	Files   []string `arg:"" optional:"" help:"Input streams (e.g. one per rank), read a step of each in turn; - or none for stdin." type:"path"`
}

// Run sums step by step: a step is the frames up to a step_end (in every
// input), or the whole input where there is none. It groups the step's
// compressed frames by tensor name, writes one sum per name in order of
// first appearance, then the step_end, and flushes.
func (c *SumCmd) Run(rio *cli.IO) error {
	ins, closeAll, err := c.open(rio.Stdin)
	if err != nil {
		return err
	}
	defer closeAll()
	w := wire.NewWriter(rio.Stdout, rio.Tool+"/"+cli.Version)
	for {
		frames, end, err := nextStep(ins)
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := c.sumStep(w, frames); err != nil {
			return err
		}
		if end != nil {
			err = w.EndStep(end.Step)
		} else {
			err = w.Flush()
		}
		if err != nil {
			return err
		}
	}
	return w.Close()
}

// open opens every input (stdin when there are none).
func (c *SumCmd) open(stdin io.Reader) ([]*cli.StepReader, func(), error) {
	files := c.Files
	if len(files) == 0 {
		files = []string{"-"}
	}
	var ins []*cli.StepReader
	var closers []func() error
	closeAll := func() {
		for _, cl := range closers {
			_ = cl()
		}
	}
	for _, name := range files {
		in, cl, err := cli.OpenInput(name, stdin)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		closers = append(closers, cl)
		ins = append(ins, cli.NewStepReader(name, in, c.Limits()))
	}
	return ins, closeAll, nil
}

// nextStep reads the next step of every input: its frames in input order
// and its step_end (nil for inputs without step ends). Every input must
// end the step the same way; io.EOF once all of them are done.
func nextStep(ins []*cli.StepReader) ([]wire.Frame, *wire.StepEnd, error) {
	var frames []wire.Frame
	var first *wire.StepEnd
	done := 0
	for i, in := range ins {
		fs, end, err := in.NextStep()
		if err != nil && err != io.EOF {
			return nil, nil, err
		}
		if err == io.EOF {
			done++
		}
		if i > 0 && !sameEnd(first, end) {
			return nil, nil, cli.WithCode(cli.ExitBadInput, fmt.Errorf("sum: %s ends its step with %s, %s with %s: the inputs' steps must line up",
				ins[0].Name, endName(first), in.Name, endName(end)))
		}
		first = end
		frames = append(frames, fs...)
	}
	if done == len(ins) {
		return nil, nil, io.EOF
	}
	if done > 0 {
		return nil, nil, cli.WithCode(cli.ExitBadInput, errors.New("sum: some inputs ended while others go on: the inputs' steps must line up"))
	}
	return frames, first, nil
}

func sameEnd(a, b *wire.StepEnd) bool {
	return (a == nil) == (b == nil) && (a == nil || a.Step == b.Step)
}

func endName(e *wire.StepEnd) string {
	if e == nil {
		return "no step_end"
	}
	return fmt.Sprintf("step_end %d", e.Step)
}

// sumStep writes one sum per tensor name of a step's frames, in order of
// first appearance.
func (c *SumCmd) sumStep(w *wire.Writer, frames []wire.Frame) error {
	var order []string
	groups := map[string][]*wire.Compressed{}
	for _, f := range frames {
		cf, ok := f.(*wire.Compressed)
		if !ok {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("sum: %s frame, want compressed", f.Type()))
		}
		if _, ok := groups[cf.Name]; !ok {
			order = append(order, cf.Name)
		}
		groups[cf.Name] = append(groups[cf.Name], cf)
	}
	for _, name := range order {
		out, err := codec.SumWith(groups[name], codec.SumOptions{Average: c.Average})
		if err != nil {
			return cli.WithCode(cli.ExitBadInput, err)
		}
		if err := w.Write(out); err != nil {
			return err
		}
	}
	return nil
}
