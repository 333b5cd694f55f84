package main

import (
	"fmt"
	"io"
	"math"
	"os"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/costmodel"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/fuser/internal/fusion"
)

// ModelFlags say where the timing model and the cost profile come from.
// They are shared by plan and eval.
type ModelFlags struct {
	cli.WireFlags
	Model string `help:"Timing model: a trainwire stream with a model frame (profiler model writes one), or a .json file with the model frame's keys; - is stdin." default:"-" env:"TRAINWIRE_MODEL"`

	CommAlphaUS float64 `name:"comm-alpha-us" help:"Communication start-up time per group, microseconds (α_g)." default:"-1" env:"TRAINWIRE_COMM_ALPHA_US"`
	CommGBps    float64 `name:"comm-gbps" help:"Effective communication rate in GB/s of gradient bytes (1/β_g: includes the codec's ratio and the collective)." default:"-1" env:"TRAINWIRE_COMM_GBPS"`
	CommSamples string  `help:"Fit the communication cost from a stream of stats frames with values bytes and ns (or the model's own comm samples when no flag is given)." type:"existingfile" env:"TRAINWIRE_COMM_SAMPLES"`
	CompAlphaUS float64 `name:"comp-alpha-us" help:"Compression launch time per group (encode + decode), microseconds (α_h)." default:"-1" env:"TRAINWIRE_COMP_ALPHA_US"`
	CompGBps    float64 `name:"comp-gbps" help:"Compression throughput (encode + decode) in GB/s (1/β_h)." default:"-1" env:"TRAINWIRE_COMP_GBPS"`
	CompSamples string  `help:"Fit the compression cost from a stream of stats frames with values bytes and ns (or encode_ns and decode_ns), as compressor bench writes; piecewise where the data says so." type:"existingfile" env:"TRAINWIRE_COMP_SAMPLES"`
}

// badInput marks errors in the user's model or profile: exit code 2.
func badInput(format string, a ...any) error {
	return cli.WithCode(cli.ExitBadInput, fmt.Errorf(format, a...))
}

// load reads the model and builds the problem (ns and bytes).
func (f *ModelFlags) load(rio *cli.IO) (*fusion.Problem, *wire.Model, map[string]string, error) {
	m, err := f.readModel(rio)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(m.Grads) == 0 {
		return nil, nil, nil, badInput("model %q has no gradients", m.Name)
	}
	size := make([]float64, len(m.Grads))
	b := make([]float64, len(m.Grads))
	for i, g := range m.Grads {
		if g.Bytes <= 0 {
			return nil, nil, nil, badInput("gradient %d (%s): bytes %d must be positive", i, g.Name, g.Bytes)
		}
		if g.ComputeNS < 0 {
			return nil, nil, nil, badInput("gradient %d (%s): compute_ns %d is negative", i, g.Name, g.ComputeNS)
		}
		size[i], b[i] = float64(g.Bytes), float64(g.ComputeNS)
	}
	if m.ForwardNS < 0 {
		return nil, nil, nil, badInput("forward_ns %d is negative", m.ForwardNS)
	}
	comm, commDesc, err := f.cost("comm", f.CommAlphaUS, f.CommGBps, f.CommSamples, m.Comm)
	if err != nil {
		return nil, nil, nil, err
	}
	comp, compDesc, err := f.cost("comp", f.CompAlphaUS, f.CompGBps, f.CompSamples, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	p, err := fusion.NewProblem(float64(m.ForwardNS), size, b, comm, comp)
	if err != nil {
		return nil, nil, nil, cli.WithCode(cli.ExitBadInput, err)
	}
	return p, m, map[string]string{"comm": commDesc, "comp": compDesc}, nil
}

func (f *ModelFlags) readModel(rio *cli.IO) (*wire.Model, error) {
	return cli.ReadModel(f.Model, rio.Stdin, f.Limits())
}

// cost builds one cost model (ns as a function of bytes): from α and rate
// flags when given, else fitted from a samples file, else from the
// model's own samples.
func (f *ModelFlags) cost(what string, alphaUS, gbps float64, samples string, own []wire.CommSample) (costmodel.Cost, string, error) {
	flag := func(s string) string { return "--" + what + "-" + s }
	switch {
	case alphaUS >= 0 || gbps >= 0:
		if alphaUS < 0 || gbps <= 0 || math.IsInf(gbps, 0) || math.IsNaN(alphaUS) {
			return nil, "", cli.WithCode(cli.ExitUsage, fmt.Errorf("%s and %s go together: α ≥ 0 microseconds and a rate > 0 GB/s (got %g, %g)",
				flag("alpha-us"), flag("gbps"), alphaUS, gbps))
		}
		c := costmodel.Linear{Alpha: alphaUS * 1e3, Beta: 1 / gbps}
		return c, fmt.Sprintf("flags: alpha %g us, %g GB/s", alphaUS, gbps), nil
	case samples != "":
		s, err := readSamples(samples, f.Limits())
		if err != nil {
			return nil, "", err
		}
		return fitted(what, samples, s)
	case len(own) > 0:
		s := make([]costmodel.Sample, len(own))
		for i, c := range own {
			s[i] = costmodel.Sample{X: float64(c.Bytes), T: float64(c.NS)}
		}
		return fitted(what, "the model's comm samples", s)
	}
	return nil, "", cli.WithCode(cli.ExitUsage, fmt.Errorf("no %s cost: give %s and %s, or %s", what, flag("alpha-us"), flag("gbps"), flag("samples")))
}

func fitted(what, from string, s []costmodel.Sample) (costmodel.Cost, string, error) {
	fit, err := costmodel.FitAuto(s)
	if err != nil {
		return nil, "", badInput("%s cost from %s: %v", what, from, err)
	}
	return fit.Cost, fmt.Sprintf("fitted from %d samples in %s: %v (relative rmse %.3g)", fit.N, from, fit.Cost, fit.RMSE), nil
}

// readSamples reads stats frames whose values carry bytes and ns (or
// encode_ns + decode_ns).
func readSamples(path string, lim wire.Limits) ([]costmodel.Sample, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	r := wire.NewReader(fh, lim)
	var out []costmodel.Sample
	for {
		fr, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		st, ok := fr.(*wire.Stats)
		if !ok {
			continue
		}
		x, okx := st.Values["bytes"]
		t, okt := st.Values["ns"]
		if !okt {
			e, oke := st.Values["encode_ns"]
			d, okd := st.Values["decode_ns"]
			t, okt = e+d, oke && okd
		}
		if okx && okt {
			out = append(out, costmodel.Sample{X: x, T: t})
		}
	}
	if len(out) == 0 {
		return nil, badInput("%s: no stats frame with values bytes and ns (or encode_ns and decode_ns)", path)
	}
	return out, nil
}
