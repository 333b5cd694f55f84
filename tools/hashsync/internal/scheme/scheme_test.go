package scheme

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/mesh/meshtest"
)

// randTensor draws a row-sparse tensor: about density·rows rows, hot low
// rows shared across ranks (a Zipf-like skew), values normal or exact
// (small multiples of 1/16, whose sums are exact in any order).
func randTensor(rng *rand.Rand, name string, rows, width int, density float64, exact bool) *Tensor {
	t := &Tensor{Name: name, Rows: rows, Width: width}
	for i := range rows {
		p := density
		if i < rows/16 {
			p = math.Min(1, density*6)
		}
		if rng.Float64() < p {
			t.Idx = append(t.Idx, uint32(i))
			for range width {
				var v float32
				if exact {
					v = float32(rng.IntN(17)-8) / 16
				} else {
					v = float32(rng.NormFloat64())
				}
				t.Val = append(t.Val, v)
			}
		}
	}
	return t
}

// runAll runs fn on every rank of an in-process mesh of n ranks.
func runAll(t *testing.T, n int, cfg Config, fn func(r int, s *Syncer) error) []error {
	t.Helper()
	ms := meshtest.Open(t, n, nil)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() {
			s, err := New(context.Background(), ms[r], cfg)
			if err != nil {
				errs[r] = err
				return
			}
			errs[r] = fn(r, s)
		})
	}
	wg.Wait()
	return errs
}

func equalBits(t *testing.T, want, got *Tensor, what string) {
	t.Helper()
	require.Equal(t, len(want.Idx), len(got.Idx), "%s: rows", what)
	if len(want.Idx) > 0 {
		require.Equal(t, want.Idx, got.Idx, "%s: row indices", what)
	}
	for i := range want.Val {
		a, b := want.Val[i], got.Val[i]
		if a != b || (a == 0 && b == 0) { // ±0 are equal; everything else bit for bit
			require.Equal(t, math.Float32bits(a), math.Float32bits(b), "%s: value %d (row %d)", what, i, want.Idx[i/want.Width])
		}
	}
}

func TestSchemesMatchReference(t *testing.T) {
	type tc struct {
		scheme string
		n      int
		exact  bool // sums in another order than rank order: use exact values
		mod    func(*Config)
	}
	cases := []tc{
		{"zen", 4, false, nil}, {"zen", 3, false, nil}, {"zen", 1, false, nil},
		{"zen", 4, false, func(c *Config) { c.Partitioner = "bucket" }},
		{"zen", 4, false, func(c *Config) { c.Pull = "bitmap" }},
		{"zen", 4, false, func(c *Config) { c.C, c.R2 = 0.05, 0.01 }}, // forced serial overflow
		{"bp-coo", 4, false, nil}, {"sparse-ps", 4, false, nil}, {"sparse-ps", 3, false, nil},
		{"omnireduce", 4, false, nil}, {"omnireduce", 3, false, func(c *Config) { c.Block = 7 }},
		{"agsparse", 4, false, nil}, {"agsparse", 3, false, nil},
		{"hitopk", 4, false, nil}, // one rank per node: node order = rank order
		{"hitopk", 4, true, func(c *Config) { c.LocalSize = 2 }},
		{"sparcml", 4, true, nil}, {"sparcml", 2, false, nil}, {"sparcml", 8, true, nil},
		{"dense", 4, true, nil}, {"dense", 3, true, nil},
		{"auto", 4, true, func(c *Config) { c.ProfileIters = 2 }},
	}
	for _, c := range cases {
		name := fmt.Sprintf("%s/n=%d", c.scheme, c.n)
		if c.mod != nil {
			name += "/variant"
		}
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig(c.scheme)
			cfg.Seed = 7
			if c.mod != nil {
				c.mod(&cfg)
			}
			shapes := []struct {
				rows, width int
				density     float64
			}{{2000, 1, 0.05}, {517, 3, 0.2}, {64, 2, 0.9}, {5, 1, 0.5}, {300, 4, 0}}
			const iters = 3
			in := make([][][]*Tensor, iters) // iteration, shape, rank
			for it := range iters {
				in[it] = make([][]*Tensor, len(shapes))
				for k, sh := range shapes {
					for r := range c.n {
						rng := rand.New(rand.NewPCG(uint64(it*100+k), uint64(r)))
						in[it][k] = append(in[it][k], randTensor(rng, fmt.Sprintf("t%d", k), sh.rows, sh.width, sh.density, c.exact))
					}
				}
			}
			outs := make([][][]*Tensor, c.n)
			errs := runAll(t, c.n, cfg, func(r int, s *Syncer) error {
				for it := range iters {
					for k := range shapes {
						p := s.Prepare(in[it][k][r])
						out, st, err := s.Sync(context.Background(), p)
						if err != nil {
							return err
						}
						if c.scheme == "zen" && cfg.C < 0.1 && in[it][k][r].Nnz() > 100 && st.Overflow == 0 {
							return fmt.Errorf("tiny hash memory did not overflow (serial %d)", st.Serial)
						}
						// Keep a copy, then hand the result back dirty: the
						// next results reuse its buffer and must overwrite
						// every value.
						kept := &Tensor{Name: out.Name, Rows: out.Rows, Width: out.Width, Idx: slices.Clone(out.Idx), Val: slices.Clone(out.Val)}
						for i := range out.Val[:cap(out.Val)] {
							out.Val[:cap(out.Val)][i] = float32(math.NaN())
						}
						s.Release(out)
						out = kept
						// The same tensor again with a dense result.
						x := in[it][k][r]
						p = s.Prepare(x)
						p.DenseOut = make([]float32, x.Rows*x.Width)
						dout, _, err := s.Sync(context.Background(), p)
						if err != nil {
							return err
						}
						outs[r] = append(outs[r], []*Tensor{out, FromDense(x.Name, dout.DenseVal, x.Rows, x.Width)})
					}
				}
				return s.Finish()
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			i := 0
			for it := range iters {
				for k := range shapes {
					want, err := Reference(in[it][k])
					require.NoError(t, err)
					for r := range c.n {
						equalBits(t, want, outs[r][i][0], fmt.Sprintf("iter %d tensor %d rank %d", it, k, r))
						equalBits(t, want, outs[r][i][1], fmt.Sprintf("iter %d tensor %d rank %d, dense result", it, k, r))
					}
					i++
				}
			}
		})
	}
}

func TestHandshakeMismatch(t *testing.T) {
	ms := meshtest.Open(t, 3, nil)
	errs := make([]error, 3)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Go(func() {
			cfg := DefaultConfig("zen")
			if r == 2 {
				cfg.Seed = 99
			}
			_, errs[r] = New(context.Background(), ms[r], cfg)
		})
	}
	wg.Wait()
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		require.Contains(t, err.Error(), "seed", "rank %d", r)
	}
	require.Contains(t, errs[0].Error(), "rank 2 has seed 99")
}

func TestTensorMismatch(t *testing.T) {
	errs := runAll(t, 3, DefaultConfig("zen"), func(r int, s *Syncer) error {
		rows := 100
		if r == 1 {
			rows = 101
		}
		_, _, err := s.Sync(context.Background(), s.Prepare(&Tensor{Name: "emb", Rows: rows, Width: 2}))
		return err
	})
	for r, err := range errs {
		require.Error(t, err, "rank %d", r)
		var me *MismatchError
		require.ErrorAs(t, err, &me, "rank %d", r)
	}
	require.Contains(t, errs[0].Error(), `rank 1 has tensor "emb" with 101 rows`)
	require.Contains(t, errs[1].Error(), `rank 0 has tensor "emb" with 100 rows`)
}

// The pull of the parameter-server schemes streams each server's sums in
// chunks (pullChunks) placed as they land: on tensors large enough for
// several chunks per server, every scheme still matches the reference
// bit for bit, with a sparse and a dense result, also with exact values
// whose sums cancel to zero (rows that travel but leave the result).
func TestPullChunks(t *testing.T) {
	const rows, width = 150_000, 16
	for _, c := range []struct {
		scheme, pull string
		n            int
		exact        bool
	}{
		{"zen", "auto", 4, false}, {"zen", "bitmap", 3, true}, {"zen", "coo", 4, true},
		{"bp-coo", "auto", 4, false}, {"sparse-ps", "auto", 3, true},
	} {
		t.Run(fmt.Sprintf("%s/%s/n=%d", c.scheme, c.pull, c.n), func(t *testing.T) {
			cfg := DefaultConfig(c.scheme)
			cfg.Seed, cfg.Pull = 9, c.pull
			in := make([]*Tensor, c.n)
			for r := range c.n {
				in[r] = randTensor(rand.New(rand.NewPCG(5, uint64(r))), "big", rows, width, 0.1, c.exact)
			}
			if c.exact {
				// Rows of rank 0 that rank 1 cancels: the servers return
				// them (zeros), the results must not hold them.
				cancel(in, 300)
			}
			want, err := Reference(in)
			require.NoError(t, err)
			if c.exact {
				require.Less(t, want.Nnz(), union(in)-200)
			}
			// Each server returns about a n-th of the union: several chunks.
			require.Greater(t, pullChunks(want.Nnz()/c.n, width), 2)
			outs := make([][2]*Tensor, c.n)
			errs := runAll(t, c.n, cfg, func(r int, s *Syncer) error {
				out, _, err := s.Sync(context.Background(), s.Prepare(in[r]))
				if err != nil {
					return err
				}
				p := s.Prepare(in[r])
				p.DenseOut = make([]float32, rows*width)
				dout, _, err := s.Sync(context.Background(), p)
				if err != nil {
					return err
				}
				outs[r] = [2]*Tensor{out, FromDense("big", dout.DenseVal, rows, width)}
				return s.Finish()
			})
			for r, err := range errs {
				require.NoError(t, err, "rank %d", r)
			}
			for r := range c.n {
				equalBits(t, want, outs[r][0], fmt.Sprintf("rank %d", r))
				equalBits(t, want, outs[r][1], fmt.Sprintf("rank %d, dense result", r))
			}
		})
	}
}

// cancel makes up to k rows that ranks 0 and 1 share sum to zero: rank 1
// sends the negation of rank 0's values, every other rank zeros.
func cancel(in []*Tensor, k int) {
	row := func(x *Tensor, i uint32) []float32 {
		j, ok := slices.BinarySearch(x.Idx, i)
		if !ok {
			return nil
		}
		return x.Val[j*x.Width : (j+1)*x.Width]
	}
	for j, i := range in[0].Idx {
		if k == 0 {
			return
		}
		b := row(in[1], i)
		if b == nil {
			continue
		}
		a := in[0].Val[j*in[0].Width : (j+1)*in[0].Width]
		for c := range a {
			b[c] = -a[c]
		}
		for _, x := range in[2:] {
			clear(row(x, i))
		}
		k--
	}
}

// union counts the distinct rows of in.
func union(in []*Tensor) int {
	seen := map[uint32]bool{}
	for _, x := range in {
		for _, i := range x.Idx {
			seen[i] = true
		}
	}
	return len(seen)
}
