package scheme

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"trainwire.dev/lib/mesh/meshtest"
	"trainwire.dev/lib/tensor"
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
// sparse and a dense (DenseOut) result, partitioned by Algorithm 1 (hash)
// and by the counting sort (bucket, the CLI's default on the CPU). Profile
// one: go test -run - -bench ZenDeepFM/sparse/bucket -cpuprofile cpu.out
// ./internal/scheme/
func BenchmarkZenDeepFM(b *testing.B) {
	for _, c := range []struct{ form, part string }{{"sparse", "hash"}, {"sparse", "bucket"}, {"dense", "hash"}, {"dense", "bucket"}} {
		form := c.form
		b.Run(form+"/"+c.part, func(b *testing.B) {
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
					cfg := DefaultConfig("zen")
					cfg.Partitioner = c.part
					s, err := New(context.Background(), ms[r], cfg)
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
						out, _, err := ss[r].Sync(context.Background(), p)
						if err != nil {
							b.Error(err)
						}
						ss[r].Release(out) // as the sync loop does once it wrote the result
					})
				}
				wg.Wait()
			}
		})
	}
}

// BenchmarkMergerPlace merges 4 servers' pulls (a hash partition of
// 85,000 of 1M rows, 16 floats each: the deepfm union at n = 4), each in
// 16 chunks, into one sparse result, as a worker does after a zen step: the
// cost per row of the merge alone, with the machine to itself, the result
// buffer reused (as Syncer.Release does), and in the cold case the caches
// flushed before each merge (in a 4-rank step, the other ranks' work does
// that).
func BenchmarkMergerPlace(b *testing.B) {
	const rows, width, servers, chunks = 1 << 20, 16, 4, 16
	rng := rand.New(rand.NewPCG(1, 2))
	runs := make([]list, servers)
	for i := uint32(0); i < rows; i++ {
		if rng.IntN(rows) < 85000 {
			q := rng.IntN(servers)
			runs[q].idx = append(runs[q].idx, i)
		}
	}
	idx, cb := make([][]uint32, servers), make([][]int, servers)
	total := 0
	for q := range runs {
		runs[q].val = make([]float32, len(runs[q].idx)*width)
		for e := range runs[q].val {
			runs[q].val[e] = rng.Float32() // non-zero rows, as gradients are
		}
		idx[q] = runs[q].idx
		for c := range chunks + 1 {
			cb[q] = append(cb[q], c*len(idx[q])/chunks)
		}
		total += len(runs[q].idx)
	}
	var pool tensor.Pool
	junk := make([]byte, 96<<20)
	for _, cold := range []bool{false, true} {
		b.Run(map[bool]string{false: "warm", true: "cold"}[cold], func(b *testing.B) {
			b.SetBytes(int64(total * width * 4))
			for b.Loop() {
				if cold {
					b.StopTimer()
					for i := 0; i < len(junk); i += 64 {
						junk[i]++
					}
					b.StartTimer()
				}
				m := newMerger("w", rows, width, idx, cb, &pool)
				for c := range chunks { // chunk by chunk, as they land
					for q := range runs {
						m.add(q, c, runs[q].val[cb[q][c]*width:cb[q][c+1]*width])
						m.merge()
					}
				}
				out, err := m.done()
				if err != nil {
					b.Fatal(err)
				}
				pool.Put(out.Val[:cap(out.Val)])
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(total), "ns/row")
		})
	}
}
