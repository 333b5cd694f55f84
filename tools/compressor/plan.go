package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/costmodel"
	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/espresso"
)

// PlanCmd is Espresso's compression-strategy planner.
type PlanCmd struct {
	cli.WireFlags
	CodecFlags
	Algo    string   `help:"Codec to plan for (see compressor list; its output size must not depend on the data)." required:"" env:"TRAINWIRE_COMPRESSOR_ALGO"`
	Model   string   `help:"Timing model: a trainwire stream holding a model frame (profiler model writes one), or a .json file with the model frame's keys; - is stdin." default:"-" env:"TRAINWIRE_MODEL"`
	Cluster string   `help:"Cluster description, a JSON file: nodes, gpus_per_node, intra_gbit_s, inter_gbit_s, intra_alpha_us, inter_alpha_us, pcie_gbit_s, pcie_alpha_us, cpu_workers." required:"" type:"existingfile" env:"TRAINWIRE_CLUSTER"`
	Samples []string `help:"compressor bench streams to fit the codec's encode/decode times from (stats frames labelled with the codec; label device=gpu for GPU samples, else CPU)." type:"existingfile" sep:"," env:"TRAINWIRE_COMPRESSOR_SAMPLES"`

	GPUEncode string `name:"gpu-encode" help:"GPU encode time as ALPHA_US:GBPS (α microseconds plus input bytes at GB/s); overrides --samples." env:"TRAINWIRE_GPU_ENCODE"`
	GPUDecode string `name:"gpu-decode" help:"GPU decode time as ALPHA_US:GBPS (of the dense output bytes)." env:"TRAINWIRE_GPU_DECODE"`
	CPUEncode string `name:"cpu-encode" help:"CPU encode time as ALPHA_US:GBPS." env:"TRAINWIRE_CPU_ENCODE"`
	CPUDecode string `name:"cpu-decode" help:"CPU decode time as ALPHA_US:GBPS." env:"TRAINWIRE_CPU_DECODE"`

	UpdateUS       float64  `name:"update-us" help:"Optimizer step after synchronization, microseconds (added to every prediction)." default:"0"`
	NoCPU          bool     `name:"no-cpu" help:"Never offload compression to CPUs (skip Algorithm 2)."`
	CPUJob         bool     `name:"cpu-job" help:"The ranks train on CPUs, without accelerators: CPU codec times (samples without a device label, or --cpu-encode/--cpu-decode) are the training device's, nothing is offloaded and no PCIe copy is priced (the cluster needs no pcie_* keys)." env:"TRAINWIRE_COMPRESSOR_CPU_JOB"`
	MaxCompOps     int      `name:"max-comp-ops" help:"At most this many compressions per gradient (0: no limit; the tree has up to 4)." default:"0"`
	Restrict       []string `help:"Only these options (device-agnostic paths as compressor plan prints them, separated by ;), e.g. 'F:AR;I1:RS > C > X:AG* > D > I2:AG'." sep:";"`
	ThresholdElems int64    `name:"threshold-elems" help:"The threshold baseline compresses gradients of at least this many elements (the artifact's 16K)." default:"16384"`
	OffloadCap     int      `name:"offload-cap" help:"Largest Π(|G_i|+1) Algorithm 2 searches exhaustively; above it, coordinate descent." default:"1000000"`
	NoBootstrap    bool     `name:"no-bootstrap" help:"Run Algorithm 1 from no compression only, as the paper does (by default it is also run from the best baseline when that is better)."`
	Explain        bool     `help:"Print on stderr why each large gradient got its option."`
	ExplainMin     int64    `name:"explain-min" help:"--explain covers gradients of at least this many elements." default:"16384"`
	Format         string   `help:"Output: frames (a plan frame per gradient and a stats frame, for tools), json or table (for people); auto is table on a terminal, frames otherwise." enum:"auto,frames,json,table" default:"auto" env:"TRAINWIRE_FORMAT"`
}

// badInput marks errors in the user's files: exit code 2.

func usage(format string, a ...any) error {
	return cli.WithCode(cli.ExitUsage, fmt.Errorf(format, a...))
}

// Run plans and writes the strategy.
func (c *PlanCmd) Run(rio *cli.IO) error {
	in, desc, err := c.instance(rio)
	if err != nil {
		return err
	}
	cpu0 := processCPU()
	res, err := in.Plan(espressoOptions(c))
	if err != nil {
		return exit.BadInputf("plan: %v", err)
	}
	cpuNS := processCPU() - cpu0
	tl, err := in.Trace(res.Strategy)
	if err != nil {
		return err
	}
	rep := &planReport{in: in, res: res, tl: tl, desc: desc, algo: c.Algo, cpuMS: float64(cpuNS) / 1e6}
	rio.Log.Info("planned", "model", in.Job.Name, "gradients", in.N(), "codec", c.Algo,
		"iter_ms", res.F/1e6, "no_compression_ms", res.Baselines[0].F/1e6, "compressed", rep.compressed(),
		"offloaded", rep.offloaded(), "selection_ms", float64(res.Wall.Microseconds())/1e3)
	if !res.OffloadExhaustive && res.OffloadGroups > 0 {
		rio.Log.Warn("offloading search hit --offload-cap: coordinate descent instead of Algorithm 2's enumeration",
			"points", res.OffloadPoints, "cap", c.OffloadCap)
	}
	if c.Explain {
		rep.explain(rio.Stderr, c.ExplainMin)
	}
	switch c.format(rio.Stdout) {
	case "json":
		enc := json.NewEncoder(rio.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep.json())
	case "table":
		return rep.table(rio.Stdout)
	}
	return rep.frames(rio.Stdout)
}

func (c *PlanCmd) format(w io.Writer) string { return cli.ResolveFormat(c.Format, w) }

// instance reads every input and builds the timeline model.
func (c *PlanCmd) instance(rio *cli.IO) (*espresso.Instance, map[string]string, error) {
	cd, err := codec.New(c.Algo, c.Options())
	if err != nil {
		return nil, nil, usage("--algo: %v", err)
	}
	if cd.Size([]int64{1 << 20}) < 0 {
		return nil, nil, usage("--algo %s: its output size depends on the data; the planner needs a codec whose size is a function of the tensor's (Espresso's requirement)", c.Algo)
	}
	if c.MaxCompOps < 0 || c.ThresholdElems < 0 || c.OffloadCap < 0 || c.UpdateUS < 0 || math.IsNaN(c.UpdateUS) {
		return nil, nil, usage("--max-comp-ops, --threshold-elems, --offload-cap and --update-us must not be negative")
	}
	tree := espresso.NewTree(c.MaxCompOps)
	if len(c.Restrict) > 0 {
		if tree, err = tree.Restrict(c.Restrict); err != nil {
			return nil, nil, usage("--restrict: %v", err)
		}
	}
	cl, err := readCluster(c.Cluster)
	if err != nil {
		return nil, nil, err
	}
	costs := espresso.Costs{Size: func(n int64) int64 { return cd.Size([]int64{n}) }}
	desc := map[string]string{}
	if err := c.codecTimes(&costs, desc); err != nil {
		return nil, nil, err
	}
	if c.CPUJob {
		if costs.CPU == nil {
			return nil, nil, usage("--cpu-job: no CPU codec times for %s: give --samples of this machine's compressor bench, or --cpu-encode/--cpu-decode", c.Algo)
		}
		costs.GPU, costs.CPU = costs.CPU, nil
		desc["gpu"], desc["cpu"] = "the CPU's (--cpu-job): "+desc["cpu"], "not used (--cpu-job: nothing to offload to)"
	}
	if c.NoCPU {
		costs.CPU = nil
		desc["cpu"] = "not used (--no-cpu)"
	}
	job, err := c.readJob(rio)
	if err != nil {
		return nil, nil, err
	}
	in, err := espresso.NewInstance(job, cl, costs, tree)
	if err != nil {
		if errors.Is(err, costmodel.ErrCluster) {
			return nil, nil, exit.BadInputf("%s: %v", c.Cluster, err)
		}
		return nil, nil, exit.BadInputf("%s: %v", cli.InputName(c.Model), err)
	}
	return in, desc, nil
}

// clusterJSON is the cluster description file.
type clusterJSON struct {
	Nodes        int      `json:"nodes"`
	GPUsPerNode  int      `json:"gpus_per_node"`
	IntraGbitS   *float64 `json:"intra_gbit_s"`
	InterGbitS   *float64 `json:"inter_gbit_s"`
	IntraAlphaUS float64  `json:"intra_alpha_us"`
	InterAlphaUS float64  `json:"inter_alpha_us"`
	PCIeGbitS    *float64 `json:"pcie_gbit_s"`
	PCIeAlphaUS  float64  `json:"pcie_alpha_us"`
	CPUWorkers   int      `json:"cpu_workers"`
	Comment      string   `json:"comment"`
}

func readCluster(path string) (costmodel.Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return costmodel.Cluster{}, err
	}
	return parseCluster(path, b)
}

// parseCluster reads a cluster description: every key known, bandwidths
// given where a collective needs them.
func parseCluster(path string, b []byte) (costmodel.Cluster, error) {
	var j clusterJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return costmodel.Cluster{}, exit.BadInputf("cluster %s: %v", path, err)
	}
	if dec.More() {
		return costmodel.Cluster{}, exit.BadInputf("cluster %s: more than one JSON value", path)
	}
	gbps := func(p *float64) float64 {
		if p == nil {
			return 0
		}
		return *p / 8 // Gbit/s to GB/s = bytes per ns
	}
	cl := costmodel.Cluster{Nodes: j.Nodes, GPUsPerNode: j.GPUsPerNode,
		Intra:      costmodel.Link{AlphaNS: j.IntraAlphaUS * 1e3, GBps: gbps(j.IntraGbitS)},
		Inter:      costmodel.Link{AlphaNS: j.InterAlphaUS * 1e3, GBps: gbps(j.InterGbitS)},
		PCIe:       costmodel.Link{AlphaNS: j.PCIeAlphaUS * 1e3, GBps: gbps(j.PCIeGbitS)},
		CPUWorkers: max(j.CPUWorkers, 1)}
	missing := func(key string, p *float64, need bool) error {
		if need && p == nil {
			return exit.BadInputf("cluster %s: %s is missing", path, key)
		}
		return nil
	}
	if err := missing("inter_gbit_s (the inter-machine bandwidth)", j.InterGbitS, j.Nodes > 1); err != nil {
		return cl, err
	}
	if err := missing("intra_gbit_s (the intra-machine bandwidth per GPU)", j.IntraGbitS, j.GPUsPerNode > 1); err != nil {
		return cl, err
	}
	if j.Nodes > 1<<20 || j.GPUsPerNode > 1<<12 || j.CPUWorkers > 1<<10 {
		return cl, exit.BadInputf("cluster %s: nodes %d, gpus_per_node %d or cpu_workers %d out of range", path, j.Nodes, j.GPUsPerNode, j.CPUWorkers)
	}
	if err := cl.Validate(false); err != nil {
		return cl, exit.BadInputf("cluster %s: %v", path, err)
	}
	return cl, nil
}

// parseRate reads ALPHA_US:GBPS into a linear cost of bytes in ns.
func parseRate(flag, s string) (*costmodel.Linear, error) {
	a, r, ok := strings.Cut(s, ":")
	alpha, err1 := strconv.ParseFloat(a, 64)
	gbps, err2 := strconv.ParseFloat(r, 64)
	if !ok || err1 != nil || err2 != nil || alpha < 0 || !(gbps > 0) || math.IsInf(alpha, 0) || math.IsInf(gbps, 0) {
		return nil, usage("--%s %q: want ALPHA_US:GBPS with α ≥ 0 and a rate > 0, e.g. 30:40", flag, s)
	}
	return &costmodel.Linear{Alpha: alpha * 1e3, Beta: 1 / gbps}, nil
}

// codecTimes builds the codec's time models: fitted from --samples, then
// overridden by the rate flags.
func (c *PlanCmd) codecTimes(costs *espresso.Costs, desc map[string]string) error {
	fitted := map[string]*costmodel.CodecTimes{}
	if len(c.Samples) > 0 {
		samples := map[string][]costmodel.CodecSample{}
		seen := map[string]bool{}
		err := cli.EachFrame(c.Samples, nil, c.Limits(), false, func(f wire.Frame) error {
			st, ok := f.(*wire.Stats)
			if !ok || st.Name != "compressor.bench" {
				return nil
			}
			seen[st.Labels["algo"]] = true
			if st.Labels["algo"] != c.Algo {
				return nil
			}
			dev := strings.ToLower(st.Labels["device"])
			if dev == "" || strings.HasPrefix(dev, "cpu") {
				dev = "cpu"
			} else if strings.HasPrefix(dev, "gpu") || strings.HasPrefix(dev, "cuda") {
				dev = "gpu"
			} else {
				return exit.BadInputf("samples: frame for %s has unknown device label %q", c.Algo, st.Labels["device"])
			}
			b, okb := st.Values["bytes_in"]
			e, oke := st.Values["encode_ns_mean"]
			d, okd := st.Values["decode_ns_mean"]
			if !okb || !oke || !okd {
				return exit.BadInputf("samples: a compressor.bench frame for %s lacks bytes_in, encode_ns_mean or decode_ns_mean", c.Algo)
			}
			samples[dev] = append(samples[dev], costmodel.CodecSample{Bytes: b, EncodeNS: e, DecodeNS: d})
			return nil
		})
		if err != nil {
			return err
		}
		if len(samples) == 0 {
			have := slices.Sorted(func(yield func(string) bool) {
				for k := range seen {
					if !yield(k) {
						return
					}
				}
			})
			return exit.BadInputf("--samples %s: no compressor.bench frame for codec %q (the files measure: %s)",
				strings.Join(c.Samples, ","), c.Algo, strings.Join(have, ", "))
		}
		for dev, s := range samples {
			ct, e, err := costmodel.FitCodec(s)
			if err != nil {
				return exit.BadInputf("--samples: %s on %s: %v", c.Algo, dev, err)
			}
			fitted[dev] = &ct
			desc[dev] = fmt.Sprintf("fitted from %d samples: %v (relative rmse %.3g)", len(s), ct, e)
		}
	}
	for _, dev := range []string{"gpu", "cpu"} {
		encFlag, decFlag := c.GPUEncode, c.GPUDecode
		if dev == "cpu" {
			encFlag, decFlag = c.CPUEncode, c.CPUDecode
		}
		if (encFlag == "") != (decFlag == "") {
			return usage("--%s-encode and --%s-decode go together", dev, dev)
		}
		if encFlag == "" {
			continue
		}
		e, err := parseRate(dev+"-encode", encFlag)
		if err != nil {
			return err
		}
		d, err := parseRate(dev+"-decode", decFlag)
		if err != nil {
			return err
		}
		fitted[dev] = &costmodel.CodecTimes{Encode: *e, Decode: *d}
		desc[dev] = fmt.Sprintf("flags: %v", fitted[dev])
	}
	costs.GPU, costs.CPU = fitted["gpu"], fitted["cpu"]
	if costs.GPU == nil && costs.CPU == nil {
		return usage("no compression times for %s: give --samples (compressor bench streams) or --gpu-encode/--gpu-decode and --cpu-encode/--cpu-decode", c.Algo)
	}
	for _, dev := range []string{"gpu", "cpu"} {
		if desc[dev] == "" {
			desc[dev] = "none: options compressing on the " + strings.ToUpper(dev) + " are not considered"
		}
	}
	return nil
}

// readJob reads the timing model.
func (c *PlanCmd) readJob(rio *cli.IO) (espresso.Job, error) {
	m, err := cli.ReadModel(c.Model, rio.Stdin, c.Limits())
	if err != nil {
		return espresso.Job{}, err
	}
	job := espresso.Job{Name: m.Name, ForwardNS: float64(m.ForwardNS), UpdateNS: c.UpdateUS * 1e3}
	if m.ForwardNS < 0 {
		return job, exit.BadInputf("%s: forward_ns %d is negative", cli.InputName(c.Model), m.ForwardNS)
	}
	for i, g := range m.Grads {
		n := g.Numel
		if n == 0 && g.Bytes > 0 {
			sz := int64(4)
			if g.DType != "" {
				sz = int64(g.DType.Size())
			}
			if sz <= 0 || g.Bytes%sz != 0 {
				return job, exit.BadInputf("%s: gradient %d (%s): bytes %d is not a whole number of %s elements", cli.InputName(c.Model), i, g.Name, g.Bytes, g.DType)
			}
			n = g.Bytes / sz
		}
		if n <= 0 {
			return job, exit.BadInputf("%s: gradient %d (%s): no size (numel %d, bytes %d)", cli.InputName(c.Model), i, g.Name, g.Numel, g.Bytes)
		}
		if g.ReadyNS < 0 || g.ComputeNS < 0 {
			return job, exit.BadInputf("%s: gradient %d (%s): ready_ns %d and compute_ns %d must not be negative", cli.InputName(c.Model), i, g.Name, g.ReadyNS, g.ComputeNS)
		}
		job.Grads = append(job.Grads, espresso.Grad{Name: g.Name, Numel: n, ReadyNS: float64(g.ReadyNS), ComputeNS: float64(g.ComputeNS)})
	}
	if len(job.Grads) == 0 {
		return job, exit.BadInputf("%s: model %q has no gradients", cli.InputName(c.Model), m.Name)
	}
	return job, nil
}

func espressoOptions(c *PlanCmd) espresso.Options {
	return espresso.Options{Threshold: c.ThresholdElems, NoCPU: c.NoCPU, OffloadCap: c.OffloadCap, NoBootstrap: c.NoBootstrap}
}
