package codec

import (
	"testing"
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
