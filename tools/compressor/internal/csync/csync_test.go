package csync

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/mesh/meshtest"
)

// tb is what testing.T and rapid.T share.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	FailNow()
}

var (
	meshMu   sync.Mutex
	meshPool = map[int][]*mesh.Mesh{}
)

// worldOf returns a shared in-process mesh of n ranks on loopback.
func worldOf(t tb, n int) []*mesh.Mesh { return pooled(t, meshPool, n) }

// pooled returns pool's mesh of n ranks, opening it the first time.
func pooled(t tb, pool map[int][]*mesh.Mesh, n int) []*mesh.Mesh {
	meshMu.Lock()
	defer meshMu.Unlock()
	if ms := pool[n]; ms != nil {
		return ms
	}
	ms, errs := meshtest.OpenAll(context.Background(), meshtest.Config(n, listen(t)))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	pool[n] = ms
	return ms
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, ms := range meshPool {
		meshtest.CloseAll(ms)
	}
	for _, ms := range interPool {
		meshtest.CloseAll(ms)
	}
	os.Exit(code)
}

// onAll runs f on every rank concurrently.
func onAll(n int, f func(r int) error) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Go(func() { errs[r] = f(r) })
	}
	wg.Wait()
	return errs
}

// codecsFor are the codecs each collective runs.
func codecsFor(coll string) []string {
	switch coll {
	case Dense:
		return []string{""}
	case Ring:
		return []string{"fp16", "bf16", "randomk"}
	case PowerSGD:
		return []string{"powersgd"}
	}
	var out []string
	for _, a := range codec.Algos() {
		if a != "powersgd" {
			out = append(out, a)
		}
	}
	return out
}

// gradient draws rank r's tensor: small values, some exact zeros and −0.
func gradient(rng *rand.Rand, d int) []float32 {
	x := make([]float32, d)
	for i := range x {
		switch rng.IntN(10) {
		case 0:
		case 1:
			x[i] = float32(math.Copysign(0, -1))
		default:
			x[i] = float32(rng.NormFloat64())
		}
	}
	return x
}

type syncCase struct {
	n, d, steps int
	shape       []int64
	coll, algo  string
	memory      string
	ratio       float64
	seed        uint64
	dataSeed    uint64
	levels      int64
	rank        int64
	threshold   float64
	dgcWarmup   int64
}

func (c syncCase) String() string {
	return fmt.Sprintf("n=%d d=%d shape=%v %s/%s memory=%s ratio=%g steps=%d", c.n, c.d, c.shape, c.coll, c.algo, c.memory, c.ratio, c.steps)
}

func (c syncCase) spec(t tb) Spec {
	sp := Spec{Collective: c.coll, Memory: c.memory}
	if c.algo != "" {
		cd, err := codec.New(c.algo, codec.Options{Ratio: c.ratio, Seed: c.seed, Levels: c.levels, Rank: c.rank, Threshold: c.threshold, DGCWarmup: c.dgcWarmup})
		require.NoError(t, err)
		sp.Codec = cd
	}
	return sp
}

// runCase syncs c.steps steps on every rank and compares each rank's
// result and byte counts with the reference.
func runCase(t tb, c syncCase) {
	ms := worldOf(t, c.n)
	ctx := context.Background()
	ss := make([]*Syncer, c.n)
	errs := onAll(c.n, func(r int) error {
		var err error
		ss[r], err = New(ctx, ms[r], []string{"test=" + c.String()})
		return err
	})
	for _, err := range errs {
		require.NoError(t, err)
	}
	ref := NewRef(c.n)
	rng := rand.New(rand.NewPCG(c.dataSeed, 7))
	for step := range c.steps {
		us := make([]*Unit, c.n)
		for r := range c.n {
			us[r] = &Unit{Name: "w", Step: int64(step), Shape: c.shape, Data: gradient(rng, c.d)}
		}
		sp := c.spec(t)
		want, vol, err := ref.Sync(us, sp)
		require.NoError(t, err, "%v: reference", c)
		outs := make([][]float32, c.n)
		stats := make([]*Stats, c.n)
		errs := onAll(c.n, func(r int) error {
			var err error
			outs[r], stats[r], err = ss[r].Sync(ctx, us[r], sp)
			return err
		})
		for r := range c.n {
			require.NoError(t, errs[r], "%v: rank %d step %d", c, r, step)
			require.Len(t, outs[r], c.d)
			for i := range want {
				if math.Float32bits(want[i]) != math.Float32bits(outs[r][i]) {
					t.Fatalf("%v: rank %d step %d element %d: %v (%08x), reference %v (%08x)", c, r, step, i,
						outs[r][i], math.Float32bits(outs[r][i]), want[i], math.Float32bits(want[i]))
				}
			}
			for ph, b := range vol {
				require.Equal(t, b[r], stats[r].Sent[ph], "%v: rank %d step %d: %s bytes sent", c, r, step, ph)
			}
			for ph, b := range stats[r].Sent {
				if ph != "meta" {
					require.Contains(t, vol, ph, "%v: rank %d sent %d bytes in phase %s", c, r, b, ph)
				}
			}
			// Dirty the result and hand it back: the next step's result
			// may reuse it and must not depend on what it held.
			for i := range outs[r] {
				outs[r][i] = float32(math.NaN())
			}
			ss[r].Release(outs[r])
		}
	}
	errs = onAll(c.n, func(r int) error { return ss[r].Finish(ctx) })
	for _, err := range errs {
		require.NoError(t, err)
	}
}

func drawCase(t *rapid.T, maxWorld int) syncCase {
	c := syncCase{}
	c.n = rapid.IntRange(1, maxWorld).Draw(t, "n")
	c.coll = rapid.SampledFrom(Collectives).Draw(t, "collective")
	c.algo = rapid.SampledFrom(codecsFor(c.coll)).Draw(t, "algo")
	c.d = rapid.OneOf(rapid.IntRange(0, 24), rapid.IntRange(25, 700)).Draw(t, "d")
	if c.algo == "powersgd" || rapid.Bool().Draw(t, "matrix") {
		rows := rapid.IntRange(1, 9).Draw(t, "rows")
		c.d = c.d / rows * rows
		c.shape = []int64{int64(rows), int64(c.d / rows)}
	}
	c.memory = rapid.SampledFrom([]string{"none", "residual", "efsignsgd", "dgc", "powersgd"}).Draw(t, "memory")
	c.ratio = rapid.SampledFrom([]float64{0.01, 0.1, 0.3, 1}).Draw(t, "ratio")
	c.seed = rapid.Uint64Range(0, 3).Draw(t, "seed")
	c.dataSeed = rapid.Uint64().Draw(t, "data")
	c.levels = rapid.SampledFrom([]int64{1, 7, 64, 300}).Draw(t, "levels")
	c.rank = rapid.Int64Range(1, 3).Draw(t, "rank")
	c.threshold = rapid.SampledFrom([]float64{0.01, 0.5, 1.5}).Draw(t, "threshold")
	c.dgcWarmup = rapid.Int64Range(0, 1).Draw(t, "warmup")
	c.steps = rapid.IntRange(1, 3).Draw(t, "steps")
	return c
}

// TestExactness: for every codec × collective, every rank's result equals
// the reference bit for bit and its bytes sent equal the closed forms,
// over several steps (error feedback, warm starts), worlds of 1–8,
// awkward lengths.
func TestExactness(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) { runCase(rt, drawCase(rt, 8)) })
}

// TestEveryPairing runs every codec with every collective it pairs with
// once, in a world of 3 with an awkward length.
func TestEveryPairing(t *testing.T) {
	for _, coll := range Collectives {
		for _, algo := range codecsFor(coll) {
			t.Run(coll+"/"+algo, func(t *testing.T) {
				c := syncCase{n: 3, d: 61, coll: coll, algo: algo, memory: "residual", ratio: 0.1, seed: 1, dataSeed: 5,
					levels: 64, rank: 2, threshold: 0.5, steps: 2}
				if algo == "powersgd" {
					c.d, c.shape = 60, []int64{6, 10}
				}
				runCase(t, c)
			})
		}
	}
}

// A mismatch of algorithm, options or shapes fails every rank with a
// *MismatchError naming another rank and the tensor; none hangs.
func TestMismatch(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		modify func(r int, u *Unit, sp *Spec)
		want   string
	}{
		{"algo", func(r int, u *Unit, sp *Spec) {
			if r == 2 {
				sp.Codec, _ = codec.New("qsgd", codec.Options{})
			}
		}, "algo"},
		{"options", func(r int, u *Unit, sp *Spec) {
			if r == 1 {
				sp.Codec, _ = codec.New("topk", codec.Options{Ratio: 0.5})
			}
		}, "params"},
		{"shape", func(r int, u *Unit, sp *Spec) {
			if r == 0 {
				u.Data = u.Data[:10]
				u.Shape = nil
			}
		}, "shape"},
		{"name", func(r int, u *Unit, sp *Spec) {
			if r == 1 {
				u.Name = "other"
			}
		}, "tensor"},
		{"collective", func(r int, u *Unit, sp *Spec) {
			if r == 2 {
				sp.Collective = Partitioned
			}
		}, "collective"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := worldOf(t, 3)
			errs := onAll(3, func(r int) error {
				s, err := New(ctx, ms[r], nil)
				if err != nil {
					return err
				}
				cd, _ := codec.New("topk", codec.Options{})
				sp := Spec{Collective: AllGather, Codec: cd}
				u := &Unit{Name: "layer.w", Shape: []int64{4, 5}, Data: make([]float32, 20)}
				tc.modify(r, u, &sp)
				_, _, err = s.Sync(ctx, u, sp)
				return err
			})
			for r, err := range errs {
				require.Error(t, err, "rank %d", r)
				var me *MismatchError
				require.ErrorAs(t, err, &me, "rank %d: %v", r, err)
				require.Contains(t, err.Error(), tc.want, "rank %d", r)
				require.Contains(t, err.Error(), "tensor #1", "rank %d", r)
				require.Regexp(t, `rank \d has`, err.Error())
			}
		})
	}
}

// A rank with more tensors than the others: Finish fails on every rank.
func TestExtraTensor(t *testing.T) {
	ctx := context.Background()
	ms := worldOf(t, 2)
	errs := onAll(2, func(r int) error {
		s, err := New(ctx, ms[r], nil)
		if err != nil {
			return err
		}
		if r == 1 {
			if _, _, err := s.Sync(ctx, &Unit{Name: "b", Data: make([]float32, 3)}, Spec{Collective: Dense}); err != nil {
				return err
			}
		}
		return s.Finish(ctx)
	})
	for r, err := range errs {
		var me *MismatchError
		require.ErrorAs(t, err, &me, "rank %d", r)
		require.True(t, strings.Contains(err.Error(), "end of its input"), "rank %d: %v", r, err)
	}
}

// Flags that differ fail the handshake.
func TestHandshakeMismatch(t *testing.T) {
	ctx := context.Background()
	ms := worldOf(t, 2)
	errs := onAll(2, func(r int) error {
		_, err := New(ctx, ms[r], []string{fmt.Sprint("average=", r == 1)})
		return err
	})
	for r, err := range errs {
		var me *MismatchError
		require.ErrorAs(t, err, &me, "rank %d", r)
		require.Contains(t, err.Error(), "average", "rank %d", r)
		require.Contains(t, err.Error(), fmt.Sprintf("rank %d has", 1-r))
	}
}

func TestResolve(t *testing.T) {
	fp16, _ := codec.New("fp16", codec.Options{})
	topk, _ := codec.New("topk", codec.Options{})
	psgd, _ := codec.New("powersgd", codec.Options{})
	for _, c := range []struct {
		sp   Spec
		want string
		err  string
	}{
		{Spec{Collective: Auto}, Dense, ""},
		{Spec{Collective: Auto, Codec: fp16}, Ring, ""},
		{Spec{Collective: Auto, Codec: topk}, AllGather, ""},
		{Spec{Collective: Auto, Codec: psgd}, PowerSGD, ""},
		{Spec{Collective: Ring, Codec: topk}, "", "ring"},
		{Spec{Collective: PowerSGD, Codec: topk}, "", "powersgd"},
		{Spec{Collective: AllGather, Codec: psgd}, "", "powersgd"},
		{Spec{Collective: AllGather}, "", "needs a codec"},
		{Spec{Collective: "bogus", Codec: topk}, "", "unknown collective"},
	} {
		sp, err := c.sp.Resolve()
		if c.err != "" {
			require.ErrorContains(t, err, c.err)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, c.want, sp.Collective)
	}
	require.True(t, slices.Contains(Collectives, PowerSGD))
}

func listen(t tb) net.Listener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	return ln
}

// A NaN on one rank fails every rank's sync with a mismatch naming it;
// the next tensor syncs.
func TestNaNOnOneRank(t *testing.T) {
	ctx := context.Background()
	ms := worldOf(t, 3)
	errs := onAll(3, func(r int) error {
		s, err := New(ctx, ms[r], nil)
		if err != nil {
			return err
		}
		cd, _ := codec.New("qsgd", codec.Options{})
		x := make([]float32, 9)
		if r == 1 {
			x[4] = float32(math.Inf(1))
		}
		_, _, err = s.Sync(ctx, &Unit{Name: "w", Data: x}, Spec{Collective: AllGather, Codec: cd, Memory: "residual"})
		var me *MismatchError
		if !errors.As(err, &me) {
			return fmt.Errorf("rank %d: %v, want a mismatch", r, err)
		}
		if r != 1 && (me.Rank != 1 || !strings.Contains(err.Error(), "+Inf")) {
			return fmt.Errorf("rank %d: %v, want rank 1's +Inf named", r, err)
		}
		_, _, err = s.Sync(ctx, &Unit{Name: "w", Data: make([]float32, 9)}, Spec{Collective: AllGather, Codec: cd, Memory: "residual"})
		return err
	})
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
