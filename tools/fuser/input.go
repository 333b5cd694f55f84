package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/costmodel"
	"trainwire.dev/lib/exit"
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
	CompSamples string  `help:"Fit the compression cost from a stream of stats frames with values bytes and ns (or encode_ns and decode_ns), or compressor bench's output (bytes_in, encode_ns_mean + decode_ns_mean); piecewise where the data says so." type:"existingfile" env:"TRAINWIRE_COMP_SAMPLES"`
	CompAlgo    string  `help:"Use only the samples labelled with this algo (needed when --comp-samples holds several, as compressor bench writes)." env:"TRAINWIRE_COMP_ALGO"`
}

// badInput marks errors in the user's model or profile: exit code 2.

// load reads the model and builds the problem (ns and bytes).
func (f *ModelFlags) load(rio *cli.IO) (*fusion.Problem, *wire.Model, map[string]string, error) {
	m, err := f.readModel(rio)
	if err != nil {
		return nil, nil, nil, err
	}
	if len(m.Grads) == 0 {
		return nil, nil, nil, exit.BadInputf("model %q has no gradients", m.Name)
	}
	size := make([]float64, len(m.Grads))
	b := make([]float64, len(m.Grads))
	for i, g := range m.Grads {
		if g.Bytes <= 0 {
			return nil, nil, nil, exit.BadInputf("gradient %d (%s): bytes %d must be positive", i, g.Name, g.Bytes)
		}
		if g.ComputeNS < 0 {
			return nil, nil, nil, exit.BadInputf("gradient %d (%s): compute_ns %d is negative", i, g.Name, g.ComputeNS)
		}
		size[i], b[i] = float64(g.Bytes), float64(g.ComputeNS)
	}
	if m.ForwardNS < 0 {
		return nil, nil, nil, exit.BadInputf("forward_ns %d is negative", m.ForwardNS)
	}
	comm, commDesc, err := f.cost("comm", f.CommAlphaUS, f.CommGBps, f.CommSamples, "", m.Comm)
	if err != nil {
		return nil, nil, nil, err
	}
	comp, compDesc, err := f.cost("comp", f.CompAlphaUS, f.CompGBps, f.CompSamples, f.CompAlgo, nil)
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
// model's own samples. algo, when set, keeps the samples labelled with it.
func (f *ModelFlags) cost(what string, alphaUS, gbps float64, samples, algo string, own []wire.CommSample) (costmodel.Cost, string, error) {
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
		s, err := readSamples(samples, algo, f.Limits())
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
		return nil, "", exit.BadInputf("%s cost from %s: %v", what, from, err)
	}
	return fit.Cost, fmt.Sprintf("fitted from %d samples in %s: %v (relative rmse %.3g)", fit.N, from, fit.Cost, fit.RMSE), nil
}

// readSamples reads stats frames whose values carry bytes and ns (or
// encode_ns + decode_ns, or compressor bench's bytes_in and
// encode_ns_mean + decode_ns_mean). algo, when set, keeps the frames
// labelled with it; when unset, frames must not name several algos.
func readSamples(path, algo string, lim wire.Limits) ([]costmodel.Sample, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	r := wire.NewReader(fh, lim)
	var out []costmodel.Sample
	algos := map[string]bool{}
	for {
		fr, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		st, ok := fr.(*wire.Stats)
		if !ok || (algo != "" && st.Labels["algo"] != algo) {
			continue
		}
		if s, ok := sample(st.Values); ok {
			out = append(out, s)
			if a := st.Labels["algo"]; a != "" {
				algos[a] = true
			}
		}
	}
	switch {
	case len(out) == 0 && algo != "":
		return nil, exit.BadInputf("%s: no stats frame labelled algo=%s with values bytes and ns (or encode_ns and decode_ns)", path, algo)
	case len(out) == 0:
		return nil, exit.BadInputf("%s: no stats frame with values bytes and ns (or encode_ns and decode_ns)", path)
	case len(algos) > 1:
		return nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("%s holds samples of %d algos (%s): say which with --comp-algo", path, len(algos), strings.Join(slices.Sorted(maps.Keys(algos)), ", ")))
	}
	return out, nil
}

// sample is one (bytes, ns) point of a stats frame's values, in any of
// the three spellings readSamples accepts.
func sample(v map[string]float64) (costmodel.Sample, bool) {
	if x, ok := v["bytes"]; ok {
		if t, ok := v["ns"]; ok {
			return costmodel.Sample{X: x, T: t}, true
		}
		e, oke := v["encode_ns"]
		d, okd := v["decode_ns"]
		return costmodel.Sample{X: x, T: e + d}, oke && okd
	}
	x, okx := v["bytes_in"]
	e, oke := v["encode_ns_mean"]
	d, okd := v["decode_ns_mean"]
	return costmodel.Sample{X: x, T: e + d}, okx && oke && okd
}
