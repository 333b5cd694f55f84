package main

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/serve"
	"trainwire.dev/lib/shm"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/straggle/internal/engine"
)

// sidecar is one rank of `straggle serve` and its Go client, whose
// gradients go through a shared-memory segment.
type sidecar struct {
	*proc
	c   *serve.Client
	seg *shm.Segment
}

// startServe starts world `straggle serve` ranks with args (and --dim 5:
// gradStream's two tensors), each with a client and a segment attached.
func startServe(t *testing.T, ctx context.Context, world int, args ...string) []*sidecar {
	t.Helper()
	dir := t.TempDir()
	procs := startRun(t, ctx, world, func(r int) []string {
		return append([]string{"serve", "--dim", "5", "--socket", filepath.Join(dir, "s{rank}.sock")}, args...)
	})
	scs := make([]*sidecar, world)
	for r, p := range procs {
		sc := &sidecar{proc: p}
		path := filepath.Join(dir, fmt.Sprintf("s%d.sock", r))
		for {
			var err error
			if sc.c, err = serve.Dial(path); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("rank %d: no socket at %s: %v; stderr: %s", r, path, err, p.Stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
		}
		t.Cleanup(func() { sc.c.Close() })
		var err error
		sc.seg, err = shm.Create(fmt.Sprintf("straggle%d", r), 4096, true)
		require.NoError(t, err)
		t.Cleanup(func() { sc.seg.Close() })
		_, err = sc.c.Attach(sc.seg, 0)
		require.NoError(t, err, "rank %d attach: %s", r, p.Stderr.String())
		scs[r] = sc
	}
	return scs
}

// step sends one step's gradient (gradStream's layout: "a" 3 floats at
// byte 0, "b" 2 at byte 12 of the segment); contribute false hands none.
func (sc *sidecar) step(t *testing.T, g []float32, contribute bool) <-chan *serve.Reply {
	t.Helper()
	copy(sc.seg.Bytes(), tensor.Bytes(g))
	req := &serve.Request{Op: serve.OpSync, Tensors: []serve.Tensor{
		{Name: "a", DType: wire.F32, Shape: []int64{3}, Seg: 0, Off: 0, Len: 12},
		{Name: "b", DType: wire.F32, Shape: []int64{2}, Seg: 0, Off: 12, Len: 8},
	}}
	if !contribute {
		req.Opts = map[string]bool{"contribute": false}
	}
	_, ch, err := sc.c.Go(req, -1)
	require.NoError(t, err)
	return ch
}

// result is the reply's averaged gradient, in the segment.
func (sc *sidecar) result() []float32 {
	return tensor.Float32s(append([]byte(nil), sc.seg.Bytes()[:20]...))
}

// totals adds contributors·average over replies: with --accumulate sum,
// the sum of every gradient the rounds reduced.
type totals []float64

func (tt totals) add(rep *serve.Reply, avg []float32) {
	for i, v := range avg {
		tt[i] += float64(rep.Info["contributors"]) * float64(v)
	}
}

func (tt totals) near(want []float64) bool {
	for i := range want {
		if math.Abs(tt[i]-want[i]) > 1e-3*math.Abs(want[i]) {
			return false
		}
	}
	return true
}

// drain asks (handing no gradient) for rounds until the totals reach
// want: every gradient reduced and its round reported here.
func (sc *sidecar) drain(t *testing.T, ctx context.Context, r int, got totals, want []float64) {
	t.Helper()
	for !got.near(want) {
		rep := clitest.Recv(t, ctx, sc.step(t, make([]float32, 5), false), fmt.Sprintf("rank %d drain", r))
		require.True(t, rep.OK, "rank %d drain: %s", r, rep.Error)
		got.add(rep, sc.result())
	}
}

// syncStepwise runs `straggle sync` filters, one per rank, step by step
// as a trainer does through a pipe: iteration k on every rank, then every
// rank's round, then iteration k+1 (a stream written all at once lets the
// blocking mode fold several iterations into one round).
func syncStepwise(t *testing.T, ctx context.Context, inputs [][][]float32, args []string) [][]roundRec {
	t.Helper()
	bin := clitest.Binary(t, "straggle")
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	world := len(inputs)
	fs := make([]*clitest.Filter, world)
	for r := range world {
		a := append([]string{"sync", "--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--master", master, "--tensors", "2"}, args...)
		fs[r] = clitest.StartFilter(t, ctx, bin, []string{"TRAINWIRE_TOKEN=e2e"}, a...)
	}
	out := make([][]roundRec, world)
	for k := range inputs[0] {
		for r, f := range fs {
			g := inputs[r][k]
			f.Write(t, wire.NewDenseF32("a", g[:3]), wire.NewDenseF32("b", g[3:]))
		}
		for r, f := range fs {
			got := f.Read(t, 3)
			st := got[0].(*wire.Stats)
			a, err := got[1].(*wire.Dense).F32()
			require.NoError(t, err)
			b, err := got[2].(*wire.Dense).F32()
			require.NoError(t, err)
			out[r] = append(out[r], roundRec{round: st.Step, vals: st.Values, grads: map[string][]float32{"a": a, "b": b}})
		}
	}
	var wg sync.WaitGroup // a rank ends once every rank's input has
	for r, f := range fs {
		wg.Go(func() {
			_, code := f.Close(t)
			assert.Equal(t, 0, code, "sync rank %d: %s", r, f.Stderr.String())
		})
	}
	wg.Wait()
	return out
}

// `straggle serve` computes what `straggle sync` computes for the same
// inputs and seed. allreduce: every step's reply is sync's round for that
// step (sync driven step by step), bit for bit, with all 4 contributors.
// rna: rounds depend on timing, so the check is RNA's invariant on both:
// with --accumulate sum, Σ over the rounds of contributors·average is the
// sum of every rank's gradients (each lands in exactly one round), and
// serve's equals sync's.
func TestServeMatchesSync(t *testing.T) {
	for _, mode := range []string{"allreduce", "rna"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const world, iters = 4, 5
			dir := t.TempDir()
			inputs := make([][][]float32, world)
			want := make([]float64, 5)
			for r := range world {
				inputs[r] = gradStream(t, filepath.Join(dir, fmt.Sprint(r)), r, iters)
				for _, it := range inputs[r] {
					for i, v := range it {
						want[i] += float64(v)
					}
				}
			}
			common := []string{"--mode", mode, "--accumulate", "sum", "--seed", "7", "--probe-timeout", "200ms", "--timeout", "20s"}
			var syncRounds [][]roundRec
			if mode == "allreduce" {
				syncRounds = syncStepwise(t, ctx, inputs, common)
			} else {
				procs := startRun(t, ctx, world, func(r int) []string {
					return append([]string{"sync", "--tensors", "2", "--input", filepath.Join(dir, fmt.Sprint(r))}, common...)
				})
				syncRounds = make([][]roundRec, world)
				for r, p := range procs {
					require.NoError(t, p.Cmd.Wait(), "sync rank %d: %s", r, p.Stderr.String())
					syncRounds[r] = rounds(t, p.Stdout.Bytes())
				}
			}

			scs := startServe(t, ctx, world, common...)
			var wg sync.WaitGroup
			for r, sc := range scs {
				wg.Go(func() {
					got := make(totals, 5)
					for k, g := range inputs[r] {
						rep := clitest.Recv(t, ctx, sc.step(t, g, true), fmt.Sprintf("rank %d step %d", r, k))
						if !assert.True(t, rep.OK, "rank %d step %d: %s", r, k, rep.Error) {
							return
						}
						avg := sc.result()
						got.add(rep, avg)
						if mode == "allreduce" {
							sr := syncRounds[r][k]
							assert.Equal(t, map[string]int64{"round": int64(k + 1), "rounds": 1, "contributors": world, "contributed": 1}, rep.Info, "rank %d step %d", r, k)
							assert.Equal(t, append(slices.Clone(sr.grads["a"]), sr.grads["b"]...), avg, "rank %d step %d: sync's round %d", r, k, sr.round)
						}
					}
					if mode == "rna" {
						sc.drain(t, ctx, r, got, want)
						syncGot := make([]float64, 5)
						for _, rec := range syncRounds[r] {
							for i, v := range append(slices.Clone(rec.grads["a"]), rec.grads["b"]...) {
								syncGot[i] += rec.vals["contributors"] * float64(v)
							}
						}
						assert.InDeltaSlice(t, syncGot, []float64(got), 1e-3*want[0], "rank %d: serve's totals vs sync's", r)
					}
					assert.NoError(t, sc.c.Close())
				})
			}
			wg.Wait()
			for r, sc := range scs {
				require.NoError(t, sc.Cmd.Wait(), "serve rank %d: %s", r, sc.Stderr.String())
			}
		})
	}
}

// One rank slowed by injection (--slow: an hour per gradient, so it never
// hands one over here) does not hold the others back: they get a reply for
// every step, from rounds it joins with null gradients. Its client then
// disconnects mid-request: its sidecar ends the injected wait, joins the
// remaining rounds until the others are done, and every sidecar exits 0.
func TestServeSlowRankDoesNotHoldOthersBack(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, slow, iters = 4, 3, 4
	scs := startServe(t, ctx, world, "--accumulate", "sum", "--compute", "1ms", "--slow", fmt.Sprintf("ranks=%d,s=3600000", slow),
		"--probe-timeout", "100ms", "--timeout", "20s")
	dir := t.TempDir()
	slowCh := scs[slow].step(t, gradStream(t, filepath.Join(dir, "slow"), slow, 1)[0], true)
	want := make([]float64, 5)
	inputs := make([][][]float32, world)
	for r := range world {
		if r != slow {
			inputs[r] = gradStream(t, filepath.Join(dir, fmt.Sprint(r)), r, iters)
			for _, it := range inputs[r] {
				for i, v := range it {
					want[i] += float64(v)
				}
			}
		}
	}
	var wg sync.WaitGroup
	for r, sc := range scs {
		if r == slow {
			continue
		}
		wg.Go(func() {
			got := make(totals, 5)
			for k, g := range inputs[r] {
				rep := clitest.Recv(t, ctx, sc.step(t, g, true), fmt.Sprintf("rank %d step %d", r, k))
				if !assert.True(t, rep.OK, "rank %d step %d: %s", r, k, rep.Error) {
					return
				}
				assert.LessOrEqual(t, rep.Info["contributors"], int64(world-1)*rep.Info["rounds"], "rank %d step %d: the slow rank contributed", r, k)
				got.add(rep, sc.result())
			}
			// Every fast gradient is reduced without the slow rank's.
			sc.drain(t, ctx, r, got, want)
		})
	}
	wg.Wait()
	select {
	case rep := <-slowCh:
		t.Fatalf("the slow rank's request was answered: %+v", rep)
	default:
	}
	require.NoError(t, scs[slow].c.Close())
	for _, sc := range scs {
		if sc != scs[slow] {
			require.NoError(t, sc.c.Close())
		}
	}
	for r, sc := range scs {
		require.NoError(t, sc.Cmd.Wait(), "rank %d: %s", r, sc.Stderr.String())
	}
	assert.Contains(t, scs[slow].Stderr.String(), "client disconnected")
}

// stepAll sends step k on the ranks given, then waits for every reply.
func stepAll(t *testing.T, ctx context.Context, scs []*sidecar, inputs [][][]float32, k int, ranks ...int) []*serve.Reply {
	t.Helper()
	chs := make([]<-chan *serve.Reply, len(ranks))
	for i, r := range ranks {
		chs[i] = scs[r].step(t, inputs[r][k], true)
	}
	reps := make([]*serve.Reply, len(ranks))
	for i, r := range ranks {
		reps[i] = clitest.Recv(t, ctx, chs[i], fmt.Sprintf("rank %d step %d", r, k))
	}
	return reps
}

// kill -9 of a rank while its first request is pending (slowed by
// injection: an hour per gradient). rna: the others go on (the rank is
// dropped, as sync drops it), answer every step and exit 0. allreduce
// (blocking): the others' requests, waiting for its gradient, fail with
// peer_failed naming the rank, and their sidecars exit 3. Either way the
// victim's client sees its socket closed.
func TestServeKilledRank(t *testing.T) {
	for _, mode := range []string{"rna", "allreduce"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			const world, victim, iters = 4, 2, 3
			scs := startServe(t, ctx, world, "--mode", mode, "--accumulate", "sum", "--probe-timeout", "100ms", "--timeout", "4s",
				"--compute", "1ms", "--slow", fmt.Sprintf("ranks=%d,s=3600000", victim))
			dir := t.TempDir()
			inputs := make([][][]float32, world)
			for r := range world {
				inputs[r] = gradStream(t, filepath.Join(dir, fmt.Sprint(r)), r, iters)
			}
			others := []int{0, 1, 3}
			victimCh := scs[victim].step(t, inputs[victim][0], true)
			var pending []<-chan *serve.Reply
			if mode == "rna" {
				for i, rep := range stepAll(t, ctx, scs, inputs, 0, others...) {
					require.True(t, rep.OK, "rank %d: %s", others[i], rep.Error)
				}
			} else {
				for _, r := range others {
					pending = append(pending, scs[r].step(t, inputs[r][0], true))
				}
			}
			_, err := scs[victim].c.Do(&serve.Request{Op: serve.OpPing}) // its request has been read
			require.NoError(t, err)
			require.NoError(t, scs[victim].Cmd.Process.Signal(syscall.SIGKILL))
			rep := clitest.Recv(t, ctx, victimCh, "the victim's client")
			assert.Equal(t, "closed", rep.Code, "the victim's client sees its socket closed: %+v", rep)
			_ = scs[victim].Cmd.Wait()
			if mode == "allreduce" {
				for i, ch := range pending {
					r := others[i]
					rep := clitest.Recv(t, ctx, ch, fmt.Sprintf("rank %d", r))
					assert.False(t, rep.OK, "rank %d", r)
					assert.Equal(t, serve.CodePeer, rep.Code, "rank %d: %s", r, rep.Error)
					assert.Equal(t, int64(victim), rep.Rank, "rank %d: %s", r, rep.Error)
					assert.Contains(t, rep.Error, fmt.Sprintf("rank %d", victim), "rank %d", r)
					assert.Equal(t, 3, clitest.ExitCode(scs[r].Cmd.Wait()), "rank %d: %s", r, scs[r].Stderr.String())
				}
				return
			}
			for k := 1; k < iters; k++ {
				for i, rep := range stepAll(t, ctx, scs, inputs, k, others...) {
					require.True(t, rep.OK, "rank %d step %d: %s", others[i], k, rep.Error)
				}
			}
			for _, r := range others { // a sidecar ends when every live rank's input has
				require.NoError(t, scs[r].c.Close())
			}
			for _, r := range others {
				require.NoError(t, scs[r].Cmd.Wait(), "rank %d: %s", r, scs[r].Stderr.String())
			}
			assert.Contains(t, scs[0].Stderr.String(), fmt.Sprintf("dead_rank=%d", victim), "rank 0 went on without it")
		})
	}
}

// SIGTERM stops a sidecar with 143 without aborting the run: the others
// go on without its rank and exit 0.
func TestServeSIGTERMLeavesRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, leaver, iters = 3, 2, 3
	scs := startServe(t, ctx, world, "--probe-timeout", "100ms", "--timeout", "4s", "--compute", "1ms", "--slow", fmt.Sprintf("ranks=%d,s=3600000", leaver))
	dir := t.TempDir()
	inputs := make([][][]float32, world)
	for r := range world {
		inputs[r] = gradStream(t, filepath.Join(dir, fmt.Sprint(r)), r, iters)
	}
	leaverCh := scs[leaver].step(t, inputs[leaver][0], true)
	_, err := scs[leaver].c.Do(&serve.Request{Op: serve.OpPing})
	require.NoError(t, err)
	require.NoError(t, scs[leaver].Cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 143, clitest.ExitCode(scs[leaver].Cmd.Wait()), scs[leaver].Stderr.String())
	rep := clitest.Recv(t, ctx, leaverCh, "the leaver's client")
	assert.Equal(t, serve.CodeShutdown, rep.Code, "%+v", rep)
	for k := range iters {
		for i, rep := range stepAll(t, ctx, scs, inputs, k, 0, 1) {
			require.True(t, rep.OK, "rank %d step %d: %s", i, k, rep.Error)
		}
	}
	for r := range 2 {
		require.NoError(t, scs[r].c.Close())
	}
	for r := range 2 {
		require.NoError(t, scs[r].Cmd.Wait(), "rank %d: %s", r, scs[r].Stderr.String())
	}
}

// A malformed request, or one whose tensors differ from the first
// request's, is refused naming its id and field; the sidecar keeps
// serving.
func TestServeRefusesBadRequests(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sc := startServe(t, ctx, 1)[0]
	ok := []serve.Tensor{
		{Name: "a", DType: wire.F32, Shape: []int64{3}, Seg: 0, Off: 0, Len: 12},
		{Name: "b", DType: wire.F32, Shape: []int64{2}, Seg: 0, Off: 12, Len: 8},
	}
	swapped := []serve.Tensor{ok[1], ok[0]}
	swapped[1].Off, swapped[0].Off = 8, 0
	for _, tc := range []struct {
		req   *serve.Request
		field string
	}{
		{&serve.Request{ID: 11, Op: serve.OpSync, Tensors: []serve.Tensor{{Name: "a", DType: wire.F32, Shape: []int64{4}, Seg: 0, Off: 0, Len: 16}}}, "tensors"},
		{&serve.Request{ID: 12, Op: serve.OpSync, Tensors: []serve.Tensor{{Name: "a", DType: wire.F16, Shape: []int64{10}, Seg: 0, Off: 0, Len: 20}}}, "tensors[0].dtype"},
		{&serve.Request{ID: 13, Op: serve.OpSync, Average: true, Tensors: ok}, "opts.average"},
		{&serve.Request{ID: 14, Op: serve.OpSync, Tensors: ok}, ""},
		{&serve.Request{ID: 15, Op: serve.OpSync, Tensors: swapped}, "tensors[0].name"},
		{&serve.Request{ID: 16, Op: serve.OpSync, Tensors: ok, Opts: map[string]bool{"contribute": true}}, ""},
	} {
		ch := sc.c.Expect(tc.req.ID)
		require.NoError(t, sc.c.SendRaw(serve.AppendRequest(nil, tc.req)))
		rep := clitest.Recv(t, ctx, ch, fmt.Sprint(tc.req.ID))
		if tc.field == "" {
			require.True(t, rep.OK, "request %d: %s", tc.req.ID, rep.Error)
			assert.Equal(t, int64(1), rep.Info["contributors"], "world of one")
			continue
		}
		assert.False(t, rep.OK, "request %d", tc.req.ID)
		assert.Equal(t, serve.CodeBadRequest, rep.Code, rep.Error)
		assert.Equal(t, tc.field, rep.Field, rep.Error)
		assert.Contains(t, rep.Error, fmt.Sprintf("request %d", tc.req.ID))
	}
	require.NoError(t, sc.c.Close())
	require.NoError(t, sc.Cmd.Wait(), sc.Stderr.String())
}

// Ranks started with different --dim refuse to run (exit 80), each
// naming a rank whose --dim differs, instead of retrying rounds forever.
func TestServeDimMismatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	procs := startRun(t, ctx, 3, func(r int) []string {
		return []string{"serve", "--dim", fmt.Sprint(5 + r/2), "--socket", filepath.Join(dir, "s{rank}.sock")}
	})
	for r, p := range procs {
		assert.Equal(t, 80, clitest.ExitCode(p.Cmd.Wait()), "rank %d: %s", r, p.Stderr.String())
		assert.Contains(t, p.Stderr.String(), "every rank's gradient must have the same elements", "rank %d", r)
		assert.Regexp(t, `on rank [02]:`, p.Stderr.String(), "rank %d", r)
	}
}

// groups mode: one round per request on every rank, each rank's reply the
// average over its round's random group (engine.Groups from the seed),
// with the group's size as contributors; after --rounds every sidecar
// exits 0 once its client leaves.
func TestServeGroups(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const world, iters = 4, 3
	dir := t.TempDir()
	inputs := make([][][]float32, world)
	for r := range world {
		inputs[r] = gradStream(t, filepath.Join(dir, fmt.Sprint(r)), r, iters)
	}
	scs := startServe(t, ctx, world, "--mode", "groups", "--rounds", fmt.Sprint(iters), "--group-size", "2", "--seed", "5", "--timeout", "20s")
	all := []int{0, 1, 2, 3}
	for k := range iters {
		reps := stepAll(t, ctx, scs, inputs, k, all...)
		group := map[int][]int{}
		for _, g := range engine.Groups(5, uint64(k+1), all, 2) {
			for _, r := range g {
				group[r] = g
			}
		}
		for r, rep := range reps {
			require.True(t, rep.OK, "rank %d step %d: %s", r, k, rep.Error)
			assert.Equal(t, map[string]int64{"round": int64(k + 1), "rounds": 1, "contributors": 2, "contributed": 1}, rep.Info, "rank %d step %d", r, k)
			want := make([]float32, 5)
			for _, m := range group[r] {
				tensor.Add(want, inputs[m][k])
			}
			tensor.Scale(want, 1/float32(2))
			assert.InDeltaSlice(t, want, scs[r].result(), 1e-6, "rank %d step %d: group %v", r, k, group[r])
		}
	}
	for r := range world {
		require.NoError(t, scs[r].c.Close())
	}
	for r := range world {
		require.NoError(t, scs[r].Cmd.Wait(), "rank %d: %s", r, scs[r].Stderr.String())
	}
}
