package codec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"trainwire.dev/lib/wire"
)

// Benchmarks of the encoders on 16 Mi floats (64 MiB), against a copy of
// the same tensor. Run: go test -run '^$' -bench . ./codec/
var benchX []float32

func benchData() []float32 {
	if benchX == nil {
		benchX = gauss(16<<20, 99)
	}
	return benchX
}

func BenchmarkMemcpy(b *testing.B) {
	x := benchData()
	dst := make([]float32, len(x))
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		copy(dst, x)
	}
}

func benchAlgo(b *testing.B, algo string, o Options) {
	x := benchData()
	c := mustNew(b, algo, o)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		if _, err := c.Encode(Input{Name: "w", Data: x, State: &State{}}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSignSGD(b *testing.B)   { benchAlgo(b, "signsgd", Options{}) }
func BenchmarkEFSignSGD(b *testing.B) { benchAlgo(b, "efsignsgd", Options{}) }
func BenchmarkOneBit(b *testing.B)    { benchAlgo(b, "onebit", Options{}) }
func BenchmarkFP16(b *testing.B)      { benchAlgo(b, "fp16", Options{}) }
func BenchmarkBF16(b *testing.B)      { benchAlgo(b, "bf16", Options{}) }
func BenchmarkQSGD(b *testing.B)      { benchAlgo(b, "qsgd", Options{}) }
func BenchmarkTopK(b *testing.B)      { benchAlgo(b, "topk", Options{}) }
func BenchmarkMSTopK(b *testing.B)    { benchAlgo(b, "mstopk", Options{}) }

// BenchmarkQSGDBlock times qsgd's rounding kernel at each level on one
// block that stays in the cache (the compute, without the memory):
// go test -run '^$' -bench QSGDBlock -cpu 1 ./codec/
func BenchmarkQSGDBlock(b *testing.B) {
	x := benchData()[:blockLen]
	codes := make([]byte, len(x))
	sc24 := float32(64.0 / 300 * (1 << 24))
	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				f()
			}
		})
	}
	run("go", func() { qsgdBlockGo(codes, x, sc24, 64<<24, 7) })
	if haveAVX2 {
		run("avx2", func() {
			old := haveAVX512
			haveAVX512 = false
			qsgdBlock(codes, x, sc24, 64<<24, 7, false)
			haveAVX512 = old
		})
	}
	if haveAVX512 {
		run("avx512", func() { qsgdBlock(codes, x, sc24, 64<<24, 7, false) })
	}
}

// BenchmarkTable times every codec's encoder and decoder beside a copy of
// the same dense tensor, alternating the two in each iteration, and
// reports the best-iteration ratio as %memcpy (the dense bytes per second
// of the codec over those of Go's copy, measured in the same moments: on
// a shared machine the ratio is steadier than either time). Decoders
// write into a reused tensor, as the copy does. bench/compressor/codecs.sh
// runs it and prints the medians:
// go test -run '^$' -bench Table -benchtime 5x -count 5 ./codec/
func BenchmarkTable(b *testing.B) {
	x := benchData()
	for _, algo := range Algos() {
		o := Options{}
		if algo == "threshold" {
			o.Threshold = 2.5 // about 1% of N(0, 1)
		}
		c := mustNew(b, algo, o)
		st := &State{}
		enc := func() *wire.Compressed {
			f, err := c.Encode(Input{Name: "w", Data: x, State: st})
			if err != nil {
				b.Fatal(err)
			}
			return f
		}
		b.Run(algo+"/enc", func(b *testing.B) { benchPaired(b, x, func() { enc() }) })
		b.Run(algo+"/dec", func(b *testing.B) {
			f, dst := enc(), make([]float32, len(x))
			benchPaired(b, x, func() {
				if _, err := Decode(f, dst); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// benchPaired runs op and a copy of x alternately and reports both
// best-iteration bandwidths and their ratio.
func benchPaired(b *testing.B, x []float32, op func()) {
	cp := make([]float32, len(x))
	bestOp, bestCp := time.Duration(math.MaxInt64), time.Duration(math.MaxInt64)
	b.SetBytes(int64(4 * len(x)))
	for b.Loop() {
		t0 := time.Now()
		copy(cp, x)
		t1 := time.Now()
		op()
		t2 := time.Now()
		bestCp, bestOp = min(bestCp, t1.Sub(t0)), min(bestOp, t2.Sub(t1))
	}
	gb := float64(4*len(x)) / 1e9
	b.ReportMetric(gb/bestOp.Seconds(), "GB/s")
	b.ReportMetric(gb/bestCp.Seconds(), "memcpy-GB/s")
	b.ReportMetric(100*bestCp.Seconds()/bestOp.Seconds(), "%memcpy")
}

// BenchmarkTopKResidual times one step of top-1% with residual error
// feedback on 44.5 M floats (ResNet-101's gradient, as compressor sync
// encodes it): the compensation, the selection and the residual update,
// the state carried from step to step.
func BenchmarkTopKResidual(b *testing.B) {
	const n = 44_500_000
	rng := rand.New(rand.NewPCG(1, 2))
	g := make([]float32, n)
	for i := range g {
		g[i] = float32(rng.NormFloat64())
	}
	c := mustNew(b, "topk", Options{Ratio: 0.01})
	mem, err := NewMemory("residual", MemoryOptions{})
	if err != nil {
		b.Fatal(err)
	}
	e := &Encoder{Codec: c, Memory: mem, NoSent: true}
	if _, _, err := e.Encode(Input{Name: "w", Data: g}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(4 * n)
	for b.Loop() {
		if _, _, err := e.Encode(Input{Name: "w", Data: g}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTopKSizes times exact top-1% alone on tensors of ResNet-101's
// sizes, by the full path and the sampled one.
func BenchmarkTopKSizes(b *testing.B) {
	for _, n := range []int{131072, 262144, 589824, 2359296} {
		x := make([]float32, n)
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		for _, path := range []string{"full", "sampled"} {
			b.Run(fmt.Sprintf("n=%d/%s", n, path), func(b *testing.B) {
				old := sampledMin
				defer func() { sampledMin = old }()
				if path == "full" {
					sampledMin = 1 << 62
				} else {
					sampledMin = 0
				}
				b.SetBytes(int64(4 * n))
				for b.Loop() {
					TopK(x, n/100, 0)
				}
			})
		}
	}
}

// BenchmarkLowRank times PowerSGD's three rank-4 products on a 512×4608
// matrix (ResNet-101's largest 3×3 convolution as PowerSGD views it).
func BenchmarkLowRank(b *testing.B) {
	const n, m, r = 512, 4608, 4
	rng := rand.New(rand.NewPCG(5, 6))
	draw := func(k int) []float32 {
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		return x
	}
	x, q, p := draw(n*m), draw(m*r), draw(n*r)
	b.Run("MQ", func(b *testing.B) {
		out := make([]float64, n*r)
		for b.Loop() {
			mulMQ(out, x, q, n, m, r)
		}
	})
	b.Run("MtP", func(b *testing.B) {
		out := make([]float64, m*r)
		for b.Loop() {
			mulMtP(out, x, p, n, m, r)
		}
	})
	b.Run("PQt", func(b *testing.B) {
		out := make([]float32, n*m)
		for b.Loop() {
			mulPQt(out, p, q, n, m, r)
		}
	})
}
