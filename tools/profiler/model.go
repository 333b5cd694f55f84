package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/profiler/internal/analysis"
	"trainwire.dev/tools/profiler/internal/builtin"
	"trainwire.dev/tools/profiler/internal/timing"
)

// ModelCmd builds the timing model the planners read.
type ModelCmd struct {
	Files            []string     `arg:"" optional:"" help:"Trace files or directories (not with --builtin)." type:"path"`
	Rank             int64        `help:"Use this rank's iterations only (-1: every rank's iterations are samples)." default:"-1" env:"TRAINWIRE_PROFILER_RANK"`
	Class            []string     `help:"Extra classification rule CLASS=REGEX (see summary)." placeholder:"CLASS=REGEX" sep:"none" env:"TRAINWIRE_PROFILER_CLASS"`
	NoDefaultClasses bool         `help:"Use only the rules given with --class." env:"TRAINWIRE_PROFILER_NO_DEFAULT_CLASSES"`
	MaxToken         cli.ByteSize `help:"Largest single JSON string or number accepted." default:"64MiB" env:"TRAINWIRE_PROFILER_MAX_TOKEN"`
	Workers          int          `help:"Parse each file's events on N goroutines fed by a splitter (0 or 1: on one, the default; the pipeline costs a third more CPU, so it only pays with idle cores)." default:"1" env:"TRAINWIRE_PROFILER_WORKERS"`
	Params           string       `help:"JSON of the parameters in registration order ([{name, numel, dtype}] or a record_ddp.py sidecar with \"params\"): names and sizes for traces that carry none. A sidecar NAME.meta.json beside a trace is read by itself." type:"existingfile" env:"TRAINWIRE_PROFILER_PARAMS"`
	SkipFirst        int          `help:"Drop the first N iterations of each rank (warm-up)." default:"0" env:"TRAINWIRE_PROFILER_SKIP_FIRST"`
	Name             string       `help:"Model name written in the frame." env:"TRAINWIRE_PROFILER_MODEL_NAME"`

	Builtin string  `help:"Build the model from the built-in library instead of a trace: resnet50, resnet101, vgg16, bert-base, gpt2, lstm." env:"TRAINWIRE_PROFILER_BUILTIN"`
	List    bool    `help:"List the built-in models and exit."`
	Batch   int64   `help:"Per-rank batch size (built-in models)." default:"32" env:"TRAINWIRE_PROFILER_BATCH"`
	TFLOPS  float64 `name:"tflops" help:"Sustained device throughput in TFLOP/s (built-in models)." default:"100" env:"TRAINWIRE_PROFILER_TFLOPS"`
	World   int64   `help:"World size written in a built-in model." default:"1" env:"TRAINWIRE_PROFILER_WORLD"`
	DType   string  `name:"dtype" help:"Gradient dtype of a built-in model (f32, f16, bf16)." default:"f32" env:"TRAINWIRE_PROFILER_DTYPE"`

	Out    string `short:"o" help:"Output: a trainwire stream with one model frame (a file appears only on success); - is stdout." default:"-" env:"TRAINWIRE_PROFILER_OUT"`
	Format string `help:"frames (a trainwire stream with the model frame), or json: the model frame's keys as JSON (fuser plan --model F.json reads it)." enum:"frames,json" default:"frames" env:"TRAINWIRE_PROFILER_MODEL_FORMAT"`
	Quiet  bool   `help:"No summary on stderr."`
}

// Help is the verb's long help.
func (ModelCmd) Help() string {
	return `Writes the per-iteration timing model fuser plan and compressor plan read: the
gradients in backprop order with their sizes and ready times (from AccumulateGrad
events, DDP buckets, Horovod negotiations or BytePS tensor-ready events), forward
and per-gradient backward compute, every communication sample (bytes, ns) and the
α-β line fitted to them (meta comm_alpha_ns, comm_beta_ns_per_byte), averaged over
iterations (and ranks) with the normalized spread (meta iter_spread,
ready_spread). --builtin writes a model of a known network with its real tensor
sizes and compute from its FLOPs at --tflops and --batch.

Exit codes: 0 ok, 1 error (no gradients found), 2 malformed trace, 80 usage.`
}

// Run builds the model.
func (c *ModelCmd) Run(rio *cli.IO) error {
	if c.List {
		tw := tabwriter.NewWriter(rio.Stdout, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "name\tparams\ttensors\tGFLOPs/sample\tinput\n")
		for _, n := range builtin.Names() {
			m, _ := builtin.Get(n)
			fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%s\n", n, m.Numel(), len(m.Params), m.FwdFLOPs()/1e9, m.Input)
		}
		return tw.Flush()
	}
	var m *wire.Model
	var err error
	switch {
	case c.Builtin != "" && len(c.Files) > 0:
		return cli.WithCode(cli.ExitUsage, errors.New("give trace files or --builtin, not both"))
	case c.Builtin != "":
		if wire.DType(c.DType).Size() <= 0 {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("--dtype %q: not a dtype of docs/wire.md", c.DType))
		}
		m, err = timing.FromBuiltin(c.Builtin, timing.BuiltinOptions{Batch: c.Batch, TFLOPS: c.TFLOPS, World: c.World, DType: wire.DType(c.DType)})
		if err != nil {
			return cli.WithCode(cli.ExitUsage, err)
		}
		if c.Name != "" {
			m.Name = c.Name
		}
	case len(c.Files) == 0:
		return cli.WithCode(cli.ExitUsage, errors.New("give trace files or directories, or --builtin NAME"))
	default:
		tf := TraceFlags{Files: c.Files, Rank: -1, Class: c.Class, NoDefaultClasses: c.NoDefaultClasses, MaxToken: c.MaxToken, Workers: c.Workers}
		ranks, err := tf.load(rio)
		if err != nil {
			return err
		}
		o := timing.Options{Name: c.Name, Rank: c.Rank, SkipFirst: c.SkipFirst}
		if c.Params != "" {
			if o.Params, err = readParams(c.Params); err != nil {
				return cli.WithCode(cli.ExitUsage, err)
			}
		}
		if m, err = timing.FromTraces(ranks, o); err != nil {
			return err
		}
		if err := sized(m); err != nil {
			return err
		}
	}
	if !c.Quiet {
		describe(rio.Stderr, m)
	}
	out, err := cli.CreateOutput(c.Out, rio.Stdout)
	if err != nil {
		return err
	}
	defer out.Close() // removes the file unless it was written whole
	if c.Format == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(jsonModel(m)); err != nil {
			return err
		}
		return out.Commit()
	}
	w := wire.NewWriter(out, "profiler/"+cli.Version)
	if err := cli.EndStream(w, w.Write(m)); err != nil {
		return err
	}
	return out.Commit()
}

// sized refuses a model whose gradients have no sizes (a legacy trace
// without Input Dims, no --params, no NAME.meta.json beside it): the
// planners cannot use it, and a model written anyway would fail there
// ("bytes 0 must be positive"), far from the cause.
func sized(m *wire.Model) error {
	var missing []string
	for _, g := range m.Grads {
		if g.Bytes <= 0 {
			missing = append(missing, g.Name)
		}
	}
	n := len(missing)
	if n == 0 {
		return nil
	}
	if n > 4 {
		missing = append(missing[:4], "…")
	}
	return cli.WithCode(cli.ExitBadInput, fmt.Errorf("%d of %d gradients have no size (%s): the traces carry no Input Dims (record with record_shapes=True) "+
		"and no parameter list: give --params, or put NAME.meta.json beside each trace (examples/common.py and tools/profiler/testdata/record/record_ddp.py write one)",
		n, len(m.Grads), strings.Join(missing, ", ")))
}

func readParams(path string) ([]analysis.MetaParam, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var list []analysis.MetaParam
	if err := json.Unmarshal(b, &list); err == nil {
		return list, nil
	}
	var meta analysis.Meta
	if err := json.Unmarshal(b, &meta); err != nil || len(meta.Params) == 0 {
		return nil, fmt.Errorf("%s: want a JSON array of {name, numel, dtype} or an object with \"params\"", path)
	}
	return meta.Params, nil
}

// jsonModel is the model frame's keys (docs/wire.md), as fuser reads them.
func jsonModel(m *wire.Model) map[string]any {
	grads := make([]map[string]any, len(m.Grads))
	for i, g := range m.Grads {
		grads[i] = map[string]any{"name": g.Name, "bytes": g.Bytes, "numel": g.Numel, "dtype": g.DType, "ready_ns": g.ReadyNS, "compute_ns": g.ComputeNS}
	}
	comm := make([]map[string]any, len(m.Comm))
	for i, c := range m.Comm {
		comm[i] = map[string]any{"op": c.Op, "bytes": c.Bytes, "ns": c.NS, "world": c.World}
	}
	return map[string]any{"t": "model", "name": m.Name, "world": m.World, "iters": m.Iters, "iter_ns": m.IterNS,
		"forward_ns": m.ForwardNS, "backward_ns": m.BackwardNS, "grads": grads, "comm": comm, "meta": m.Meta}
}

func describe(w io.Writer, m *wire.Model) {
	var bytes int64
	for _, g := range m.Grads {
		bytes += g.Bytes
	}
	fmt.Fprintf(w, "model %s: %d gradients, %.2f MiB, world %d, %d iterations: iteration %.3f ms, forward %.3f ms, backward %.3f ms\n",
		m.Name, len(m.Grads), float64(bytes)/(1<<20), m.World, m.Iters, float64(m.IterNS)/1e6, float64(m.ForwardNS)/1e6, float64(m.BackwardNS)/1e6)
	keys := make([]string, 0, len(m.Meta))
	for k := range m.Meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m.Meta[k]))
	}
	fmt.Fprintf(w, "  %s\n", strings.Join(parts, " "))
	if len(m.Comm) > 0 {
		fmt.Fprintf(w, "  %d communication samples\n", len(m.Comm))
	}
}
