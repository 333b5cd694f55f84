package scheme

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"trainwire.dev/lib/mesh/meshtest"
)

// BenchmarkSync4 synchronizes a DeepFM-like row-sparse tensor (200k rows ×
// 16, about 1.6% of the rows, hot rows shared) among 4 in-process ranks.
func BenchmarkSync4(b *testing.B) {
	for _, sch := range []string{"zen", "bp-coo", "agsparse", "sparcml"} {
		b.Run(sch, func(b *testing.B) {
			const n = 4
			in := make([]*Tensor, n)
			for r := range n {
				in[r] = randTensor(rand.New(rand.NewPCG(1, uint64(r))), "emb", 200_000, 16, 0.012, false)
			}
			ms := meshtest.Open(b, n, nil)
			ss := make([]*Syncer, n)
			var wg sync.WaitGroup
			for r := range n {
				wg.Go(func() {
					s, err := New(context.Background(), ms[r], DefaultConfig(sch))
					if err != nil {
						b.Error(err)
					}
					ss[r] = s
				})
			}
			wg.Wait()
			b.ResetTimer()
			for b.Loop() {
				for r := range n {
					wg.Go(func() {
						if _, _, err := ss[r].Sync(context.Background(), ss[r].Prepare(in[r])); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}

// BenchmarkZenDeepFM is zen on the benchmark's shape: 1M rows × 16, about
// 2.8% of the rows per rank (hot rows shared), 4 in-process ranks, with a
// sparse and a dense (DenseOut) result. Profile one: go test -run - -bench
// ZenDeepFM -cpuprofile cpu.out ./internal/scheme/
func BenchmarkZenDeepFM(b *testing.B) {
	for _, form := range []string{"sparse", "dense"} {
		b.Run(form, func(b *testing.B) {
			const n, rows, w = 4, 1_000_000, 16
			in := make([]*Tensor, n)
			for r := range n {
				in[r] = randTensor(rand.New(rand.NewPCG(1, uint64(r))), "emb", rows, w, 0.0215, false)
			}
			ms := meshtest.Open(b, n, nil)
			ss := make([]*Syncer, n)
			dense := make([][]float32, n)
			var wg sync.WaitGroup
			for r := range n {
				dense[r] = make([]float32, rows*w)
				wg.Go(func() {
					s, err := New(context.Background(), ms[r], DefaultConfig("zen"))
					if err != nil {
						b.Error(err)
					}
					ss[r] = s
				})
			}
			wg.Wait()
			b.ResetTimer()
			for b.Loop() {
				for r := range n {
					wg.Go(func() {
						p := ss[r].Prepare(in[r])
						if form == "dense" {
							clear(dense[r])
							p.DenseOut = dense[r]
						}
						if _, _, err := ss[r].Sync(context.Background(), p); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
		})
	}
}
