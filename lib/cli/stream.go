package cli

import (
	"io"

	"trainwire.dev/lib/wire"
)

// StepFilter is the loop of a verb that transforms a stream and answers
// step by step (docs/wire.md, "Steps"): every answer is written and
// flushed before the filter waits for more input, so a caller that writes
// a step and then waits for its answer never deadlocks.
type StepFilter struct {
	// Out receives the answers; Run flushes it after every input frame.
	Out *wire.Writer
	// Frame answers one data frame (writing zero or more frames to Out).
	Frame func(wire.Frame) error
	// Step, when set, is called at a step_end before it is passed on to
	// Out: a verb that answers a step as a whole (a sum, a join) writes
	// that answer here, and refuses the step if it is incomplete.
	Step func(*wire.StepEnd) error
}

// Run reads the named inputs in order ("-", or none, is stdin), as
// EachFrame does, answering every data frame with Frame and every
// step_end with Step and then a step_end of its own; Out is flushed after
// each. Headers and ends are the stream's own: Out writes its own.
func (f *StepFilter) Run(files []string, stdin io.Reader, lim wire.Limits) error {
	return EachFrame(files, stdin, lim, true, func(fr wire.Frame) error {
		switch fr := fr.(type) {
		case *wire.Header, *wire.End:
			return nil
		case *wire.StepEnd:
			if f.Step != nil {
				if err := f.Step(fr); err != nil {
					return err
				}
			}
			return f.Out.EndStep(fr.Step)
		}
		if err := f.Frame(fr); err != nil {
			return err
		}
		return f.Out.Flush()
	})
}

// StepReader reads one input a step at a time: the data frames up to the
// next step_end, or up to the end of the input for a stream without step
// ends (which is then one step).
type StepReader struct {
	// Name is the input's name, for errors ("-" is stdin).
	Name string
	r    *wire.Reader
	eof  bool
}

// NewStepReader returns a StepReader of in, called name in errors.
func NewStepReader(name string, in io.Reader, lim wire.Limits) *StepReader {
	return &StepReader{Name: name, r: wire.NewReader(in, lim)}
}

// NextStep returns the next step's data frames and its step_end (nil when
// the input ended without one). After the last step it returns io.EOF.
// Read errors name the input, unless it is stdin.
func (s *StepReader) NextStep() ([]wire.Frame, *wire.StepEnd, error) {
	if s.eof {
		return nil, nil, io.EOF
	}
	var frames []wire.Frame
	for {
		f, err := s.r.NextFrame()
		if err == io.EOF {
			s.eof = true
			if frames == nil {
				return nil, nil, io.EOF
			}
			return frames, nil, nil
		}
		if err != nil {
			return nil, nil, inputErr(s.Name, err)
		}
		switch f := f.(type) {
		case *wire.Header, *wire.End:
			continue
		case *wire.StepEnd:
			return frames, f, nil
		}
		frames = append(frames, f)
	}
}
