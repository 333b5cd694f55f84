package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// BenchCmd measures every codec's throughput and ratio.
type BenchCmd struct {
	CodecFlags
	cli.WireFlags
	Input  string         `help:"Measure on the first dense f32 tensor of this stream instead of generated N(0,1) data (--sizes is then ignored); bench/compressor uses it to time Go and PyTorch on the same tensor." type:"path"`
	Algos  []string       `help:"Algorithms to measure (default: all); memcpy is the baseline and always runs." sep:","`
	Sizes  []cli.ByteSize `help:"Input sizes in bytes of f32 (multiples of 4), comma-separated." default:"64KiB,1MiB,16MiB" sep:","`
	Iters  int            `help:"Timed repetitions per algorithm and size." default:"10"`
	Warmup int            `help:"Untimed repetitions first." default:"2"`
	Format string         `help:"frames (stats frames, one per algorithm and size: what planners fit cost models to) or table." enum:"frames,table" default:"frames"`
}

type benchRow struct {
	algo            string
	elems, in, out  int64
	encMean, encStd float64 // seconds
	decMean, decStd float64
	encMin, decMin  float64 // the best iteration: what a loaded machine distorts least
}

// Run measures and reports.
func (c *BenchCmd) Run(rio *cli.IO) error {
	algos := c.Algos
	if len(algos) == 0 {
		algos = codec.Algos()
	}
	if c.Iters < 1 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("bench: --iters %d < 1", c.Iters))
	}
	var rows []benchRow
	type tensorIn struct {
		x     []float32
		shape []int64
	}
	var ins []tensorIn
	if c.Input != "" {
		x, shape, err := c.readInput(rio)
		if err != nil {
			return err
		}
		ins = append(ins, tensorIn{x, shape})
	}
	for _, sz := range c.Sizes {
		if c.Input != "" {
			break
		}
		if sz <= 0 || sz%4 != 0 {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("bench: size %d is not a positive multiple of 4", sz))
		}
		n := int(sz / 4)
		x := tensor.Alloc(n)
		r := rand.New(rand.NewPCG(1, uint64(n)))
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		shape := []int64{int64(n)}
		if n%1024 == 0 {
			shape = []int64{int64(n / 1024), 1024} // a matrix, for powersgd
		}
		ins = append(ins, tensorIn{x, shape})
	}
	for _, t := range ins {
		x, shape := t.x, t.shape
		rows = append(rows, benchMemcpy(x, c.Warmup, c.Iters))
		for _, a := range algos {
			cd, err := codec.New(a, c.Options())
			if err != nil {
				return cli.WithCode(cli.ExitUsage, err)
			}
			row, err := benchCodec(cd, x, shape, c.Warmup, c.Iters)
			if err != nil {
				return err
			}
			rows = append(rows, row)
			rio.Log.Debug("bench", "algo", a, "elements", len(x), "encode_s", row.encMean)
		}
	}
	if c.Format == "table" {
		tw := tabwriter.NewWriter(rio.Stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "algo\tbytes_in\tratio\tencode_ms\tencode_GB/s\tdecode_ms\tdecode_GB/s\t")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%d\t%.5f\t%.3f\t%.2f\t%.3f\t%.2f\t\n", r.algo, r.in, float64(r.out)/float64(r.in),
				r.encMean*1e3, float64(r.in)/r.encMean/1e9, r.decMean*1e3, float64(r.in)/r.decMean/1e9)
		}
		return tw.Flush()
	}
	w := wire.NewWriter(rio.Stdout, rio.Tool+"/"+cli.Version)
	w.SetMeta(map[string]string{"gomaxprocs": fmt.Sprint(runtime.GOMAXPROCS(0)), "goarch": runtime.GOARCH})
	for _, r := range rows {
		err := w.Write(&wire.Stats{Tool: rio.Tool, Name: "compressor.bench", Rank: -1,
			Values: map[string]float64{
				"elements": float64(r.elems), "bytes_in": float64(r.in), "bytes_out": float64(r.out),
				"ratio":          float64(r.out) / float64(r.in),
				"encode_ns_mean": r.encMean * 1e9, "encode_ns_std": r.encStd * 1e9,
				"decode_ns_mean": r.decMean * 1e9, "decode_ns_std": r.decStd * 1e9,
				"encode_ns_min": r.encMin * 1e9, "decode_ns_min": r.decMin * 1e9,
				"encode_GBps": float64(r.in) / r.encMean / 1e9, "decode_GBps": float64(r.in) / r.decMean / 1e9,
				"iters": float64(c.Iters),
			},
			Labels: map[string]string{"algo": r.algo, "size": fmt.Sprint(r.in), "dtype": "f32"}})
		if err != nil {
			return err
		}
	}
	return w.Close()
}

func meanStd(ts []float64) (float64, float64) {
	var s, ss float64
	for _, t := range ts {
		s += t
	}
	m := s / float64(len(ts))
	for _, t := range ts {
		ss += (t - m) * (t - m)
	}
	return m, math.Sqrt(ss / float64(len(ts)))
}

func timeIt(warm, iters int, f func() error) ([]float64, error) {
	for range warm {
		if err := f(); err != nil {
			return nil, err
		}
	}
	ts := make([]float64, iters)
	for i := range ts {
		t0 := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		ts[i] = time.Since(t0).Seconds()
	}
	return ts, nil
}

func benchMemcpy(x []float32, warm, iters int) benchRow {
	dst := tensor.Alloc(len(x))
	ts, _ := timeIt(warm, iters, func() error { copy(dst, x); return nil })
	m, s := meanStd(ts)
	b := int64(4 * len(x))
	return benchRow{algo: "memcpy", elems: int64(len(x)), in: b, out: b, encMean: m, encStd: s, decMean: m, decStd: s,
		encMin: slices.Min(ts), decMin: slices.Min(ts)}
}

func benchCodec(cd codec.Codec, x []float32, shape []int64, warm, iters int) (benchRow, error) {
	st := &codec.State{}
	var f *wire.Compressed
	enc, err := timeIt(warm, iters, func() error {
		var err error
		f, err = cd.Encode(codec.Input{Name: "bench", Shape: shape, Data: x, State: st})
		return err
	})
	if err != nil {
		return benchRow{}, err
	}
	dst := tensor.Alloc(len(x))
	dec, err := timeIt(warm, iters, func() error {
		_, err := codec.Decode(f, dst)
		return err
	})
	if err != nil {
		return benchRow{}, err
	}
	var out int64
	for _, p := range f.Parts {
		out += int64(len(p.Data))
	}
	em, es := meanStd(enc)
	dm, ds := meanStd(dec)
	return benchRow{algo: cd.Algo(), elems: int64(len(x)), in: int64(4 * len(x)), out: out, encMean: em, encStd: es, decMean: dm, decStd: ds,
		encMin: slices.Min(enc), decMin: slices.Min(dec)}, nil
}

// readInput returns the first dense f32 tensor of --input, in memory
// aligned like every tensor the tools allocate.
func (c *BenchCmd) readInput(rio *cli.IO) ([]float32, []int64, error) {
	var x []float32
	var shape []int64
	err := cli.EachFrame([]string{c.Input}, rio.Stdin, c.Limits(), false, func(f wire.Frame) error {
		d, ok := f.(*wire.Dense)
		if !ok || x != nil {
			return nil
		}
		if d.DType != wire.F32 {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("bench: %q is %s, want f32", d.Name, d.DType))
		}
		v, err := d.F32()
		if err != nil {
			return err
		}
		x = tensor.Alloc(len(v))
		copy(x, v)
		shape = d.Shape
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if x == nil {
		return nil, nil, cli.WithCode(cli.ExitBadInput, fmt.Errorf("bench: %s holds no dense tensor", c.Input))
	}
	return x, shape, nil
}
