package pipeline

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A small DLRM: an embedding table (model-parallel in the real thing) and
// a dense layer; mini-batch t is a deterministic bag of rows per sample.
const (
	rows, dim, batch, bag = 64, 8, 16, 3
	lr                    = 0.05
)

type params struct {
	emb   []float32 // rows × dim
	dense []float32 // dim
}

type state struct {
	idx    [][]int     // per sample, its rows
	label  []float32   // per sample
	pooled [][]float32 // SFP: per sample, the sum of its rows
	dlogit []float32   // FP: dloss/dlogit per sample
	gDense []float32   // BP
	gEmb   map[int][]float32
}

func model() Model[*params] {
	return Model[*params]{
		Clone: func(p *params) *params { return &params{emb: slices.Clone(p.emb), dense: slices.Clone(p.dense)} },
		Apply: func(p *params, it *Item[*params]) error {
			s := it.Data.(*state)
			for j, g := range s.gDense {
				p.dense[j] -= lr * g
			}
			keys := make([]int, 0, len(s.gEmb))
			for r := range s.gEmb {
				keys = append(keys, r)
			}
			slices.Sort(keys)
			for _, r := range keys {
				for j, g := range s.gEmb[r] {
					p.emb[r*dim+j] -= lr * g
				}
			}
			return nil
		},
	}
}

func initial() *params {
	rng := rand.New(rand.NewPCG(1, 2))
	p := &params{emb: make([]float32, rows*dim), dense: make([]float32, dim)}
	for i := range p.emb {
		p.emb[i] = float32(rng.NormFloat64() * 0.1)
	}
	for i := range p.dense {
		p.dense[i] = float32(rng.NormFloat64() * 0.1)
	}
	return p
}

// jitter sleeps a deterministic, varying time, so stages overlap
// differently from run to run of the pipeline but not of Seq.
func jitter(t, stage int) {
	d := time.Duration((t*7+stage*13)%5) * 100 * time.Microsecond
	time.Sleep(d)
}

// stages are the four stages of Eq. 6.2 (without communication, which the
// real engine overlaps with them): sparse forward, dense forward, dense
// backward, sparse backward.
func stages(sleep bool) []Stage[*params] {
	return []Stage[*params]{
		func(_ context.Context, it *Item[*params]) error { // SFP: lookups, pooled
			rng := rand.New(rand.NewPCG(uint64(it.T), 7))
			s := &state{}
			for range batch {
				var idx []int
				pooled := make([]float32, dim)
				for range bag {
					r := int(math.Min(float64(rows-1), rng.ExpFloat64()*8)) // hot rows first
					idx = append(idx, r)
					for j := range dim {
						pooled[j] += it.Params.emb[r*dim+j]
					}
				}
				s.idx, s.pooled = append(s.idx, idx), append(s.pooled, pooled)
				s.label = append(s.label, float32(rng.IntN(2)))
			}
			it.Data = s
			if sleep {
				jitter(it.T, 0)
			}
			return nil
		},
		func(_ context.Context, it *Item[*params]) error { // FP: logistic loss gradient
			s := it.Data.(*state)
			for i, x := range s.pooled {
				z := float32(0)
				for j := range dim {
					z += x[j] * it.Params.dense[j]
				}
				s.dlogit = append(s.dlogit, (float32(1/(1+math.Exp(-float64(z))))-s.label[i])/batch)
			}
			if sleep {
				jitter(it.T, 1)
			}
			return nil
		},
		func(_ context.Context, it *Item[*params]) error { // BP: dense gradient
			s := it.Data.(*state)
			s.gDense = make([]float32, dim)
			for i, x := range s.pooled {
				for j := range dim {
					s.gDense[j] += s.dlogit[i] * x[j]
				}
			}
			if sleep {
				jitter(it.T, 2)
			}
			return nil
		},
		func(_ context.Context, it *Item[*params]) error { // SBP: embedding row gradients
			s := it.Data.(*state)
			s.gEmb = map[int][]float32{}
			for i, idx := range s.idx {
				for _, r := range idx {
					g := s.gEmb[r]
					if g == nil {
						g = make([]float32, dim)
						s.gEmb[r] = g
					}
					for j := range dim {
						g[j] += s.dlogit[i] * it.Params.dense[j]
					}
				}
			}
			if sleep {
				jitter(it.T, 3)
			}
			return nil
		},
	}
}

// TestPipelineEqualsSequential: the four stages running concurrently,
// with jitter, give bit for bit the parameters of a sequential run under
// the same staleness schedule, for staleness 0 to 3; and staleness
// changes the result (the schedule is really applied).
func TestPipelineEqualsSequential(t *testing.T) {
	const n = 60
	var results []*params
	for _, s := range []int{0, 1, 3} {
		want, err := Seq(context.Background(), model(), stages(false), s, initial(), n)
		require.NoError(t, err)
		for range 3 {
			e := &Engine[*params]{Model: model(), Stages: stages(true), Staleness: s}
			got, err := e.Run(context.Background(), initial(), n)
			require.NoError(t, err)
			require.Equal(t, want.emb, got.emb, "staleness %d", s)
			require.Equal(t, want.dense, got.dense, "staleness %d", s)
		}
		results = append(results, want)
	}
	require.NotEqual(t, results[0].dense, results[2].dense)
}

// TestStalenessBound: no mini-batch ever reads parameters more than S
// updates old, none reads a version not yet applied, and the pipeline
// does run ahead of the updates (it overlaps) by up to S.
func TestStalenessBound(t *testing.T) {
	for _, s := range []int{1, DefaultStaleness} {
		var mu sync.Mutex
		ahead := 0
		e := &Engine[*params]{Model: model(), Stages: stages(true), Staleness: s, OnRead: func(tt, v, newest int) {
			mu.Lock()
			defer mu.Unlock()
			require.LessOrEqual(t, tt-v, s, "mini-batch %d read version %d", tt, v)
			require.LessOrEqual(t, v, newest, "mini-batch %d read version %d before it existed (%d)", tt, v, newest)
			ahead = max(ahead, tt-newest)
		}}
		_, err := e.Run(context.Background(), initial(), 80)
		require.NoError(t, err)
		require.LessOrEqual(t, ahead, s)
		require.Greater(t, ahead, 0, "the pipeline never ran ahead of its updates")
	}
}

// TestStageErrorStops: a failing stage stops the pipeline, which returns
// its error naming the stage and mini-batch, and does not hang.
func TestStageErrorStops(t *testing.T) {
	st := stages(true)
	boom := errors.New("boom")
	inner := st[2]
	st[2] = func(ctx context.Context, it *Item[*params]) error {
		if it.T == 17 {
			return boom
		}
		return inner(ctx, it)
	}
	e := &Engine[*params]{Model: model(), Stages: st, Staleness: 3}
	done := make(chan error, 1)
	go func() { _, err := e.Run(context.Background(), initial(), 1000); done <- err }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, boom)
		require.EqualError(t, err, "pipeline: stage 2, mini-batch 17: boom")
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline hangs after a stage failed")
	}
}
