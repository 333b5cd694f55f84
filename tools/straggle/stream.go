package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/straggle/internal/engine"
	"trainwire.dev/tools/straggle/internal/inject"
)

// tensorInfo is one tensor of an iteration's gradient.
type tensorInfo struct {
	name  string
	shape []int64
	n     int
}

// streamSource reads the trainer's gradients: dense f32 frames per
// iteration, the same names and shapes every time; an iteration is
// --tensors frames, or with --tensors 0 the frames up to each step_end.
// A frame's step is the round whose parameters the gradient was computed
// on (the last round the trainer applied; 0 before any).
type streamSource struct {
	r       *wire.Reader
	tensors int // 0: iterations end at step_end frames
	layout  []tensorInfo
	dim     int
	first   []float32
	firstV  uint64
	// pendingLayout collects the first iteration's tensors.
	pendingLayout []tensorInfo
}

func (s *streamSource) badFrame(idx, off int64, typ string, err error) error {
	return &wire.DecodeError{Frame: idx, Offset: off, Type: typ, Err: err}
}

// stepped reports whether iterations end at step_end frames.
func (s *streamSource) stepped() bool { return s.tensors == 0 }

// next returns the next data frame or step_end, with its index and
// offset; io.EOF at the end of the input.
func (s *streamSource) next() (wire.Frame, int64, int64, error) {
	for {
		off, idx := s.r.Offset(), s.r.Frames()
		f, err := s.r.NextFrame()
		if err != nil {
			return nil, idx, off, err
		}
		switch f.(type) {
		case *wire.Header, *wire.End:
			continue
		}
		return f, idx, off, nil
	}
}

// read returns the next iteration, or io.EOF at the end of the stream.
func (s *streamSource) read() ([]float32, uint64, error) {
	var g []float32
	var version uint64
	for i := 0; s.stepped() || i < s.tensors; {
		f, idx, off, err := s.next()
		if err == io.EOF && i == 0 {
			return nil, 0, io.EOF
		}
		if err == io.EOF {
			return nil, 0, s.badFrame(idx, off, "", fmt.Errorf("stream ended inside an iteration, after %d tensors", i))
		}
		if err != nil {
			return nil, 0, err
		}
		if se, ok := f.(*wire.StepEnd); ok {
			done, err := s.stepEnd(se, i, idx, off)
			if err != nil {
				return nil, 0, err
			}
			if done {
				break
			}
			continue
		}
		d, err := s.check(f, i, idx, off)
		if err != nil {
			return nil, 0, err
		}
		if i == 0 || uint64(d.Step) < version {
			version = uint64(d.Step)
		}
		g = appendF32(g, d.Data)
		if s.layout == nil {
			s.pendingLayout = append(s.pendingLayout, tensorInfo{d.Name, slices.Clone(d.Shape), len(d.Data) / 4})
		}
		i++
	}
	if s.layout == nil {
		s.layout, s.pendingLayout = s.pendingLayout, nil
	}
	return g, version, nil
}

// stepEnd takes a step_end after i tensors of an iteration: with
// --tensors 0 it ends the iteration (done), with --tensors N it may only
// come between iterations (skipped).
func (s *streamSource) stepEnd(se *wire.StepEnd, i int, idx, off int64) (done bool, err error) {
	switch {
	case !s.stepped() && i == 0:
		return false, nil
	case !s.stepped():
		return false, s.badFrame(idx, off, se.Type(), fmt.Errorf("step %d ends after %d of the iteration's %d tensors (--tensors)", se.Step, i, s.tensors))
	case i == 0:
		return false, s.badFrame(idx, off, se.Type(), fmt.Errorf("step %d ends with no tensor", se.Step))
	case s.layout != nil && i != len(s.layout):
		return false, s.badFrame(idx, off, se.Type(), fmt.Errorf("step %d ends after %d tensors; the first iteration had %d", se.Step, i, len(s.layout)))
	}
	return true, nil
}

// check checks the i-th tensor of an iteration against the first one.
func (s *streamSource) check(f wire.Frame, i int, idx, off int64) (*wire.Dense, error) {
	d, ok := f.(*wire.Dense)
	if !ok {
		return nil, s.badFrame(idx, off, f.Type(), fmt.Errorf("straggle sync reads dense gradient frames, got a %s frame", f.Type()))
	}
	if d.DType != wire.F32 {
		return nil, s.badFrame(idx, off, d.Type(), fmt.Errorf("tensor %q is %s; straggle sync takes f32", d.Name, d.DType))
	}
	if d.Step < 0 {
		return nil, s.badFrame(idx, off, d.Type(), fmt.Errorf("tensor %q: step %d (the round its parameters came from) is negative", d.Name, d.Step))
	}
	if s.layout == nil {
		return d, nil
	}
	if i >= len(s.layout) {
		return nil, s.badFrame(idx, off, d.Type(), fmt.Errorf("tensor %d of the iteration is %q; the first iteration had %d tensors", i, d.Name, len(s.layout)))
	}
	if want := s.layout[i]; d.Name != want.name || !slices.Equal(d.Shape, want.shape) {
		return nil, s.badFrame(idx, off, d.Type(), fmt.Errorf("tensor %d of the iteration is %q %v; the first iteration had %q %v here", i, d.Name, d.Shape, want.name, want.shape))
	}
	return d, nil
}

// appendF32 appends little-endian f32 bytes to g.
func appendF32(g []float32, b []byte) []float32 {
	off, n := len(g), len(b)/4
	g = slices.Grow(g, n)[:off+n]
	for k := range n {
		g[off+k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
	}
	return g
}

// per says what makes an iteration, for messages.
func (s *streamSource) per() string {
	if s.stepped() {
		return "each iteration ended by a step_end"
	}
	return fmt.Sprintf("%d per iteration", s.tensors)
}

// learn reads the first iteration, which fixes the layout.
func (s *streamSource) learn() error {
	g, v, err := s.read()
	if err == io.EOF {
		return fmt.Errorf("sync: the input holds no gradient (expected dense f32 frames, %s)", s.per())
	}
	if err != nil {
		return err
	}
	if len(g) == 0 {
		return fmt.Errorf("sync: the first gradient is empty")
	}
	s.first, s.firstV, s.dim = g, v, len(g)
	return nil
}

// loop pushes every iteration to the engine (after the injected delay),
// then says the input ended.
func (s *streamSource) loop(ctx context.Context, eng *engine.Engine, model *inject.Model, rng *rand.Rand, rank int, st *iterStats) error {
	g, v := s.first, s.firstV
	idleFrom := time.Now()
	for {
		began := time.Now()
		if !sleepCtx(ctx, drawDur(model, rank, rng)) {
			return ctx.Err()
		}
		st.add(time.Since(began), began.Sub(idleFrom))
		eng.Push(v, g)
		idleFrom = time.Now()
		var err error
		g, v, err = s.read()
		if errors.Is(err, io.EOF) {
			eng.EndInput()
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// output writes each round: a stats frame (round, contributors, …) and,
// for the stream filter, the averaged gradient as dense frames with the
// input's names and shapes, step = the round; then, when the input's
// iterations end with step_end frames, a step_end for the round. Each
// round is flushed as soon as it is written.
type output struct {
	w       *wire.Writer
	emit    string
	rank    int
	mode    string
	layout  []tensorInfo
	stepped bool
}

func (o *output) round(res *engine.Result, loss float64) error {
	if o.emit == "none" {
		return nil
	}
	vals := map[string]float64{
		"contributors":  float64(res.Weight),
		"members":       float64(res.Members),
		"epoch":         float64(res.Epoch),
		"initiator":     float64(res.Initiator),
		"contributed":   b2f(res.Contributed),
		"accumulated":   float64(res.Accumulated),
		"staleness":     float64(res.Staleness),
		"dropped_stale": float64(res.DroppedStale),
		"elapsed_s":     res.Elapsed.Seconds(),
	}
	if !math.IsNaN(loss) {
		vals["loss"] = loss
	}
	probes := ""
	for i, p := range res.Probes {
		if i > 0 {
			probes += ","
		}
		probes += strconv.Itoa(p)
	}
	lab := map[string]string{"mode": o.mode}
	if probes != "" {
		if o.mode == engine.ModeGroups {
			lab["group"] = probes
		} else {
			lab["probes"] = probes
		}
	}
	if err := o.w.Write(&wire.Stats{Tool: "straggle", Name: "round", Step: int64(res.Round), Rank: int64(o.rank), Values: vals, Labels: lab}); err != nil {
		return err
	}
	if o.emit == "all" && o.layout != nil && res.Weight > 0 {
		inv := 1 / float32(res.Weight)
		off := 0
		for _, t := range o.layout {
			b := make([]byte, 4*t.n)
			for k := range t.n {
				binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(res.Sum[off+k]*inv))
			}
			off += t.n
			if err := o.w.Write(&wire.Dense{Name: t.name, Step: int64(res.Round), Rank: int64(o.rank), DType: wire.F32, Shape: t.shape, Data: b}); err != nil {
				return err
			}
		}
	}
	if o.stepped {
		return o.w.EndStep(int64(res.Round))
	}
	return o.w.Flush()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
