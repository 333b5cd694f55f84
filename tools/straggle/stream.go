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

// streamSource reads the trainer's gradients: --tensors dense f32 frames
// per iteration, the same names and shapes every time. A frame's step is
// the round whose parameters the gradient was computed on (the last round
// the trainer applied; 0 before any).
type streamSource struct {
	r       *wire.Reader
	tensors int
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

// read returns the next iteration, or io.EOF at the end of the stream.
func (s *streamSource) read() ([]float32, uint64, error) {
	var g []float32
	var version uint64
	for i := range s.tensors {
		off, idx := s.r.Offset(), s.r.Frames()
		f, err := s.r.Next()
		if err == io.EOF && i == 0 {
			return nil, 0, io.EOF
		}
		if err == io.EOF {
			return nil, 0, s.badFrame(idx, off, "", fmt.Errorf("stream ended inside an iteration: %d of its %d tensors came", i, s.tensors))
		}
		if err != nil {
			return nil, 0, err
		}
		d, ok := f.(*wire.Dense)
		if !ok {
			return nil, 0, s.badFrame(idx, off, f.Type(), fmt.Errorf("straggle sync reads dense gradient frames, got a %s frame", f.Type()))
		}
		if d.DType != wire.F32 {
			return nil, 0, s.badFrame(idx, off, d.Type(), fmt.Errorf("tensor %q is %s; straggle sync takes f32", d.Name, d.DType))
		}
		if d.Step < 0 {
			return nil, 0, s.badFrame(idx, off, d.Type(), fmt.Errorf("tensor %q: step %d (the round its parameters came from) is negative", d.Name, d.Step))
		}
		n := len(d.Data) / 4
		if s.layout != nil {
			want := s.layout[i]
			if d.Name != want.name || !slices.Equal(d.Shape, want.shape) {
				return nil, 0, s.badFrame(idx, off, d.Type(), fmt.Errorf("tensor %d of the iteration is %q %v; the first iteration had %q %v here", i, d.Name, d.Shape, want.name, want.shape))
			}
		}
		if i == 0 || uint64(d.Step) < version {
			version = uint64(d.Step)
		}
		off0 := len(g)
		g = slices.Grow(g, n)[:off0+n]
		for k := range n {
			g[off0+k] = math.Float32frombits(binary.LittleEndian.Uint32(d.Data[4*k:]))
		}
		if s.layout == nil {
			s.pendingLayout = append(s.pendingLayout, tensorInfo{d.Name, slices.Clone(d.Shape), n})
		}
	}
	if s.layout == nil {
		s.layout, s.pendingLayout = s.pendingLayout, nil
	}
	return g, version, nil
}

// learn reads the first iteration, which fixes the layout.
func (s *streamSource) learn() error {
	g, v, err := s.read()
	if err == io.EOF {
		return fmt.Errorf("sync: the input holds no gradient (expected %d dense f32 frames per iteration)", s.tensors)
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
// input's names and shapes, step = the round.
type output struct {
	w      *wire.Writer
	emit   string
	rank   int
	mode   string
	layout []tensorInfo
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
	return o.w.Flush()
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
