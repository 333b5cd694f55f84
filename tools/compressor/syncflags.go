package main

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/compressor/internal/csync"
)

// SyncFlags choose what `sync` and `serve` run on each tensor: the codec
// and collective (or a plan), the error feedback and its state. Every rank
// must give the same (the handshake and each tensor's agreement check it).
type SyncFlags struct {
	SyncCodecFlags
	Algo       string   `help:"Codec (see compressor list); none: no compression (collective dense). With --plan, the compression plan's codec is used (--algo, if given, must name it)." default:"" env:"TRAINWIRE_COMPRESSOR_ALGO"`
	Collective string   `help:"Collective: dense, allgather, ring (fp16, bf16, randomk), partitioned (Espresso's alltoall + allgather), a2a-ag, a2a-dense, rs-ag, powersgd, or auto (ring for fp16/bf16/randomk, powersgd for powersgd, allgather for the rest, dense without a codec). A compression plan sets it per tensor." enum:"auto,dense,allgather,ring,partitioned,a2a-ag,a2a-dense,rs-ag,powersgd" default:"auto" env:"TRAINWIRE_COMPRESSOR_COLLECTIVE"`
	Memory     string   `help:"Error feedback at every compression point: none, residual, dgc, efsignsgd or powersgd." enum:"none,residual,dgc,efsignsgd,powersgd" default:"none" env:"TRAINWIRE_COMPRESSOR_MEMORY"`
	Beta       float64  `help:"residual: p = β·e + γ·g, β." default:"1"`
	Gamma      float64  `help:"residual: p = β·e + γ·g, γ." default:"1"`
	DGCMom     float64  `name:"dgc-momentum" help:"dgc memory: momentum m of u = m·u + g." default:"0.9"`
	LR         float64  `help:"efsignsgd memory: p = e + lr·g." default:"1"`
	EFLR       float64  `name:"ef-lr" help:"Learning-rate-rescaled error feedback: the current learning rate (residual, efsignsgd, powersgd memories); 0 is off." default:"0" env:"TRAINWIRE_COMPRESSOR_EF_LR"`
	DGCClip    float64  `name:"dgc-clip" help:"dgc memory: clip each gradient to this L2 norm first; 0 is off." default:"0"`
	Plan       []string `help:"Plans to execute: a compressor plan stream (a collective per gradient, the plan's codec) and/or a fuser plan stream (gradients synced as groups), --format frames. Tensors not in the plan, or of other sizes, are an error (a plan for another model)." type:"existingfile" sep:"," env:"TRAINWIRE_COMPRESSOR_PLAN"`
	StateIn    string   `help:"Read the error-feedback state (a stream written by --state-out, or by compressor encode) before the first tensor." type:"path" env:"TRAINWIRE_COMPRESSOR_STATE_IN"`
	StateOut   string   `help:"Write the error-feedback state (dense frames TENSOR[#POINT]@SLOT) at the end." type:"path" env:"TRAINWIRE_COMPRESSOR_STATE_OUT"`
	NoOverlap  bool     `name:"no-overlap" help:"Encode a bucket of tensors only after the previous one's exchange (by default the next bucket is encoded while one is on the wire)." env:"TRAINWIRE_COMPRESSOR_NO_OVERLAP"`
	// Hierarchical runs every collective in two levels.
	Hierarchical bool `help:"Two levels (Espresso's hierarchical communication): each node's ranks send their tensors to the node's local rank 0, which sums them; the collectives run among these leaders on a mesh of their own; the leaders send the results back. Needs the launcher's node and local ranks (TRAINWIRE_NODE_RANK, TRAINWIRE_NUM_NODES, TRAINWIRE_LOCAL_RANK, TRAINWIRE_LOCAL_WORLD, or torchrun's, Slurm's, ...). The error-feedback state (--state-in/--state-out) is the node's, on its leader." env:"TRAINWIRE_COMPRESSOR_HIERARCHICAL"`
}

// SyncCodecFlags are CodecFlags with PowerSGD's rank as --powersgd-rank
// (--rank is the launcher's).
type SyncCodecFlags struct {
	Ratio        float64 `help:"Density ρ of the sparsifiers: k = ceil(ρ·d), in [1, d]." default:"0.01" env:"TRAINWIRE_COMPRESSOR_RATIO"`
	K            int64   `help:"Fixed k for the sparsifiers (overrides --ratio when positive)." default:"0" env:"TRAINWIRE_COMPRESSOR_K"`
	Seed         uint64  `help:"Seed of every random draw (with the tensor name and step); every rank must use the same." default:"0" env:"TRAINWIRE_COMPRESSOR_SEED"`
	Levels       int64   `help:"QSGD levels s (1..32767): int8 codes up to 127, int16 above." default:"64" env:"TRAINWIRE_COMPRESSOR_LEVELS"`
	Clip         float64 `help:"TernGrad's gradient clipping: bound |x| by clip·σ; 0 is off." default:"0" env:"TRAINWIRE_COMPRESSOR_CLIP"`
	DGCWarmup    int64   `name:"dgc-warmup" help:"dgc: steps per stage of DGC's warm-up; 0 is off." default:"0" env:"TRAINWIRE_COMPRESSOR_DGC_WARMUP"`
	Threshold    float64 `help:"threshold's τ: elements with |x| ≥ τ are sent." default:"0.01"`
	Samplings    int64   `help:"MSTopK's N: threshold probes (1..64)." default:"30"`
	PowerSGDRank int64   `name:"powersgd-rank" help:"PowerSGD rank r." default:"1" env:"TRAINWIRE_COMPRESSOR_POWERSGD_RANK"`
	Momentum     float64 `help:"Signum's momentum β." default:"0.9"`
	Unbiased     bool    `help:"randomk: scale values by d/k so the decoded tensor is unbiased."`
	Workers      int     `help:"Goroutines for the parallel kernels (0: GOMAXPROCS); results do not depend on it." default:"0" env:"TRAINWIRE_COMPRESSOR_WORKERS"`
}

// Options returns the codec options the flags ask for.
func (f SyncCodecFlags) Options() codec.Options {
	return codec.Options{Ratio: f.Ratio, K: f.K, Seed: f.Seed, Levels: f.Levels, Clip: f.Clip, DGCWarmup: f.DGCWarmup, Threshold: f.Threshold,
		Samplings: f.Samplings, Rank: f.PowerSGDRank, Momentum: f.Momentum, Unbiased: f.Unbiased, Workers: f.Workers}
}

func (f *SyncFlags) memOpts() codec.MemoryOptions {
	return codec.MemoryOptions{Beta: f.Beta, Gamma: f.Gamma, Momentum: f.DGCMom, LR: f.LR, RescaleLR: f.EFLR, ClipNorm: f.DGCClip}
}

// runner builds the Runner the flags describe (its Syncer is set later)
// and the handshake's fields.
func (f *SyncFlags) runner(lim wire.Limits) (*csync.Runner, []string, error) {
	rn := &csync.Runner{Default: csync.Spec{Collective: f.Collective, Memory: f.Memory, MemOpts: f.memOpts()}}
	if _, err := codec.NewMemory(f.Memory, f.memOpts()); err != nil {
		return nil, nil, cli.WithCode(cli.ExitUsage, err)
	}
	var planBytes bytes.Buffer
	if len(f.Plan) > 0 {
		rn.Plan = &csync.Plan{}
		for _, path := range f.Plan {
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, nil, err
			}
			planBytes.Write(b)
			if err := rn.Plan.ReadPlan(bytes.NewReader(b), lim); err != nil {
				return nil, nil, fmt.Errorf("--plan %s: %w", path, err)
			}
		}
	}
	algo := f.Algo
	if rn.Plan != nil && rn.Plan.Tensors != nil {
		if algo != "" && algo != rn.Plan.Codec {
			return nil, nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--algo %s, but the compression plan is for codec %s", algo, rn.Plan.Codec))
		}
		c, err := codec.New(rn.Plan.Codec, f.Options())
		if err != nil {
			return nil, nil, &csync.PlanError{Err: fmt.Errorf("the compression plan's codec: %w", err)}
		}
		rn.PlanCodec = c
		algo = rn.Plan.Codec
	} else if algo != "" && algo != "none" {
		c, err := codec.New(algo, f.Options())
		if err != nil {
			return nil, nil, cli.WithCode(cli.ExitUsage, fmt.Errorf("--algo: %w", err))
		}
		rn.Default.Codec = c
	}
	if rn.Plan == nil || rn.Plan.Tensors == nil {
		sp, err := rn.Default.Resolve()
		if err != nil {
			return nil, nil, cli.WithCode(cli.ExitUsage, err)
		}
		rn.Default = sp
	}
	sum := sha256.Sum256(planBytes.Bytes())
	// The codec, collective and memory are checked with every tensor
	// (naming it); the plans once.
	hello := []string{fmt.Sprintf("plan=%x", sum[:8]), fmt.Sprint("hierarchical=", f.Hierarchical)}
	return rn, hello, nil
}

// readState loads --state-in into the syncer's store.
func (f *SyncFlags) readState(rio *cli.IO, rn *csync.Runner, lim wire.Limits) error {
	if f.StateIn == "" {
		return nil
	}
	in, closeF, err := cli.OpenInput(f.StateIn, rio.Stdin)
	if err != nil {
		return err
	}
	defer closeF()
	st, err := codec.ReadStore(wire.NewReader(in, lim))
	if err != nil {
		return cli.WithCode(cli.ExitBadInput, fmt.Errorf("--state-in %s: %w", f.StateIn, err))
	}
	rn.S.Store = st
	return nil
}

// writeState writes the store to path (atomically).
func writeState(rio *cli.IO, path string, st *codec.Store, algo string) error {
	return writeFileAtomic(path, func(w io.Writer) error {
		sw := wire.NewWriter(w, rio.Tool+"/"+cli.Version)
		sw.SetMeta(map[string]string{"kind": "compressor-state", "algo": algo})
		if err := st.WriteTo(sw); err != nil {
			return err
		}
		return sw.Close()
	})
}
