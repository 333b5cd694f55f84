package main

import (
	"io"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
)

// CodecFlags are the parameters of every codec; each reads the ones
// `compressor list` names.
type CodecFlags struct {
	Ratio     float64 `help:"Density ρ of the sparsifiers: k = ceil(ρ·d), in [1, d]." default:"0.01" env:"TRAINWIRE_COMPRESSOR_RATIO"`
	K         int64   `help:"Fixed k for the sparsifiers (overrides --ratio when positive)." default:"0" env:"TRAINWIRE_COMPRESSOR_K"`
	Seed      uint64  `help:"Seed of every random draw (with the tensor name and step); every rank must use the same." default:"0" env:"TRAINWIRE_COMPRESSOR_SEED"`
	Levels    int64   `help:"QSGD levels s (1..32767): int8 codes up to 127, int16 above." default:"64" env:"TRAINWIRE_COMPRESSOR_LEVELS"`
	Clip      float64 `help:"TernGrad's gradient clipping: bound |x| by clip·σ (σ the tensor's standard deviation; the paper uses 2.5); 0 is off." default:"0" env:"TRAINWIRE_COMPRESSOR_CLIP"`
	DGCWarmup int64   `name:"dgc-warmup" help:"dgc: steps per stage of DGC's warm-up (density 25%, 6.25%, 1.5625%, 0.390625%, then --ratio); 0 is off." default:"0" env:"TRAINWIRE_COMPRESSOR_DGC_WARMUP"`
	Threshold float64 `help:"threshold's τ: elements with |x| ≥ τ are sent." default:"0.01"`
	Samplings int64   `help:"MSTopK's N: threshold probes (1..64)." default:"30"`
	Selector  string  `help:"hitopk's row selection: l2 (exact: the k rows of largest L2 norm) or mstopk (MSTopK on the row norms)." default:"l2" enum:"l2,mstopk" env:"TRAINWIRE_COMPRESSOR_SELECTOR"`
	Rank      int64   `help:"PowerSGD rank r." default:"1"`
	Momentum  float64 `help:"Signum's momentum β." default:"0.9"`
	Unbiased  bool    `help:"randomk: scale values by d/k so the decoded tensor is unbiased."`
	Workers   int     `help:"Goroutines for the parallel kernels (0: GOMAXPROCS); results do not depend on it." default:"0" env:"TRAINWIRE_COMPRESSOR_WORKERS"`
}

// DeviceFlags choose where encode runs its codec.
type DeviceFlags struct {
	Device string `help:"Where the codec runs: cpu, gpu (the first GPU) or gpu:N. gpu needs a binary built with -tags cuda (bin/compressor-cuda) and one of the GPU codecs (bf16, efsignsgd, fp16, mstopk, onebit, qsgd, signsgd, terngrad, topk) with memory none, residual or efsignsgd; the frames are byte-identical to cpu's." default:"cpu" env:"TRAINWIRE_COMPRESSOR_DEVICE"`
}

// Options returns the codec options the flags ask for.
func (f CodecFlags) Options() codec.Options {
	return codec.Options{Ratio: f.Ratio, K: f.K, Seed: f.Seed, Levels: f.Levels, Clip: f.Clip, DGCWarmup: f.DGCWarmup, Threshold: f.Threshold,
		Samplings: f.Samplings, RowSelector: f.Selector, Rank: f.Rank, Momentum: f.Momentum, Unbiased: f.Unbiased, Workers: f.Workers}
}

// writeFileAtomic writes a stream to path through a cli.AtomicFile, so a
// reader never sees half a state file.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	f, err := cli.CreateAtomic(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := write(f); err != nil {
		return err
	}
	return f.Commit()
}
