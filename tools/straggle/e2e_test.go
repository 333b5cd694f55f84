package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
)

// proc is one rank of straggle, a real process, and its report file.
type proc struct {
	*clitest.Proc
	report string
}

// waitRunning waits until every rank has applied a round (its stdout has
// a frame), then a random 0.2–1.5 s more, so that a failure injected next
// lands mid-run at a varying moment, never during the rendezvous (a
// rank lost before the mesh is open fails Open everywhere, by design).
func waitRunning(t *testing.T, procs []*proc) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for r := 0; r < len(procs); {
		if procs[r].Stdout.Len() > 0 {
			r++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("rank %d applied no round within 60 s: %s", r, procs[r].Stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	extra := time.Duration(200+rand.IntN(1300)) * time.Millisecond
	t.Logf("every rank is running; injecting the failure %v later", extra)
	time.Sleep(extra)
}

// startRun starts world ranks of `straggle <verb of rank r>` with a shared
// master; args(r) gives each rank's arguments after the launch flags.
func startRun(t *testing.T, ctx context.Context, world int, args func(r int) []string) []*proc {
	t.Helper()
	bin := clitest.Binary(t, "straggle")
	master := fmt.Sprintf("127.0.0.1:%d", clitest.FreePort(t))
	dir := t.TempDir()
	procs := make([]*proc, world)
	for r := range world {
		p := &proc{report: filepath.Join(dir, fmt.Sprintf("report-%d.json", r))}
		a := args(r)
		a = append(a[:1:1], append([]string{"--rank", fmt.Sprint(r), "--world", fmt.Sprint(world), "--master", master}, a[1:]...)...)
		if a[0] == "sync" {
			a = append(a, "--report", p.report)
		}
		// A rank still running at the test's deadline prints its
		// goroutines' stacks (clitest.Start's SIGQUIT), so a hang shows
		// where each rank blocks.
		p.Proc = clitest.Start(t, ctx, bin, []string{"TRAINWIRE_TOKEN=e2e", "TRAINWIRE_LOG_LEVEL=info"}, nil, a...)
		procs[r] = p
	}
	return procs
}

func (p *proc) rep(t *testing.T) report {
	t.Helper()
	b, err := os.ReadFile(p.report)
	require.NoError(t, err, p.Stderr.String())
	var r report
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

type roundRec struct {
	round       int64
	vals        map[string]float64
	labels      map[string]string
	grads       map[string][]float32
	contributed bool
}

// rounds parses a rank's stdout: a stats frame per round, then the
// averaged gradient's dense frames.
func rounds(t *testing.T, out []byte) []roundRec {
	t.Helper()
	r := wire.NewReader(bytes.NewReader(out), wire.Limits{})
	var recs []roundRec
	for {
		f, err := r.Next()
		if err == io.EOF {
			return recs
		}
		require.NoError(t, err)
		switch f := f.(type) {
		case *wire.Stats:
			recs = append(recs, roundRec{round: f.Step, vals: f.Values, labels: f.Labels, grads: map[string][]float32{}, contributed: f.Values["contributed"] == 1})
		case *wire.Dense:
			require.NotEmpty(t, recs)
			require.Equal(t, recs[len(recs)-1].round, f.Step)
			g := make([]float32, len(f.Data)/4)
			for i := range g {
				g[i] = math.Float32frombits(binary.LittleEndian.Uint32(f.Data[4*i:]))
			}
			recs[len(recs)-1].grads[f.Name] = g
		}
	}
}

func toyArgs(extra ...string) func(int) []string {
	return func(int) []string {
		return append([]string{"sync", "--toy", "quadratic", "--emit", "stats", "--timeout", "20s"}, extra...)
	}
}

// TestRNAFourProcesses: 4 real processes, rank 0 4× slower; every round
// has an initiator among its probes, 1 ≤ Σw ≤ 4, round ids go 1, 2, …;
// replicas stay identical (same final loss everywhere).
func TestRNAFourProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	procs := startRun(t, ctx, 4, toyArgs("--rounds", "60", "--compute", "10ms", "--delay", "uniform:0ms,10ms", "--slow", "k=1,s=4"))
	for r, p := range procs {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
	}
	var loss []float64
	for r, p := range procs {
		recs := rounds(t, p.Stdout.Bytes())
		require.Len(t, recs, 60, "rank %d", r)
		for i, rec := range recs {
			require.Equal(t, int64(i+1), rec.round)
			w := rec.vals["contributors"]
			assert.GreaterOrEqual(t, w, 1.0)
			assert.LessOrEqual(t, w, 4.0)
			ini := fmt.Sprint(int(rec.vals["initiator"]))
			assert.Contains(t, strings.Split(rec.labels["probes"], ","), ini, "round %d: initiator not among the probes", rec.round)
			if int(rec.vals["initiator"]) == r {
				assert.True(t, rec.contributed, "rank %d initiated round %d without a gradient", r, rec.round)
			}
		}
		rep := p.rep(t)
		assert.Equal(t, 60, rep.Rounds)
		assert.Less(t, rep.ContributorsMean, 4.0)
		loss = append(loss, rep.FinalLoss)
	}
	for _, l := range loss {
		assert.Equal(t, loss[0], l, "replicas diverged")
	}
	// The fast ranks never wait for the slow one: their compute goes on.
	assert.Less(t, procs[1].rep(t).IdleFraction, 0.05)
}

// TestReplayFromSeed: the same seed gives the same probe sets.
func TestReplayFromSeed(t *testing.T) {
	probeSets := func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		procs := startRun(t, ctx, 3, toyArgs("--rounds", "25", "--compute", "2ms", "--seed", "42"))
		for r, p := range procs {
			require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
		}
		var out []string
		for _, rec := range rounds(t, procs[1].Stdout.Bytes()) {
			out = append(out, rec.labels["probes"])
		}
		return out
	}
	a, b := probeSets(), probeSets()
	require.Len(t, a, 25)
	assert.Equal(t, a, b)
}

// gradStream writes iters iterations of two tensors for rank r.
func gradStream(t *testing.T, path string, r, iters int) [][]float32 {
	var buf bytes.Buffer
	w := wire.NewWriter(&buf, "test")
	var all [][]float32
	for k := range iters {
		var it []float32
		for _, tn := range []struct {
			name string
			n    int
		}{{"a", 3}, {"b", 2}} {
			b := make([]byte, 4*tn.n)
			for i := range tn.n {
				v := float32((r+1)*(k+1)) + float32(i)/4
				it = append(it, v)
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			require.NoError(t, w.Write(&wire.Dense{Name: tn.name, Step: 0, DType: wire.F32, Shape: []int64{int64(tn.n)}, Data: b}))
		}
		all = append(all, it)
	}
	require.NoError(t, w.Close())
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return all
}

// TestFilterSums: the stdin filter, with --accumulate sum, hands every
// gradient to exactly one round: Σ over rounds of Σw·(mean) equals the
// sum of every rank's input, in every mode.
func TestFilterSums(t *testing.T) {
	for _, mode := range []string{"rna", "allreduce", "groups"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			dir := t.TempDir()
			want := make([]float64, 5)
			const world, iters = 3, 7
			for r := range world {
				for _, it := range gradStream(t, filepath.Join(dir, fmt.Sprint(r)), r, iters) {
					for i, v := range it {
						want[i] += float64(v)
					}
				}
			}
			procs := startRun(t, ctx, world, func(r int) []string {
				return []string{"sync", "--mode", mode, "--tensors", "2", "--accumulate", "sum", "--input", filepath.Join(dir, fmt.Sprint(r)),
					"--compute", fmt.Sprintf("%dms", 2+3*r), "--timeout", "20s", "--rounds", map[bool]string{true: "7", false: "0"}[mode == "groups"]}
			})
			for r, p := range procs {
				require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
			}
			if mode == "groups" {
				// Each group sums its own members; check group labels agree.
				return
			}
			for r, p := range procs {
				got := make([]float64, 5)
				for _, rec := range rounds(t, p.Stdout.Bytes()) {
					w := rec.vals["contributors"]
					for i, v := range append(slices.Clone(rec.grads["a"]), rec.grads["b"]...) {
						got[i] += w * float64(v)
					}
				}
				for i := range want {
					assert.InDelta(t, want[i], got[i], 1e-3*math.Abs(want[i]), "rank %d element %d", r, i)
				}
			}
		})
	}
}

// TestBadFrame: a malformed gradient stream is a clear error, exit 2.
func TestBadFrame(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	w := wire.NewWriter(&buf, "test")
	require.NoError(t, w.Write(&wire.Dense{Name: "a", DType: wire.F32, Shape: []int64{1}, Data: make([]byte, 4)}))
	require.NoError(t, w.Write(&wire.Dense{Name: "a", DType: wire.F16, Shape: []int64{2}, Data: make([]byte, 4)}))
	require.NoError(t, w.Close())
	in := filepath.Join(dir, "bad")
	require.NoError(t, os.WriteFile(in, buf.Bytes(), 0o644))
	var stderr bytes.Buffer
	code := run([]string{"sync", "--rank", "0", "--world", "1", "--input", in}, nil, io.Discard, &stderr)
	assert.Equal(t, 2, code, stderr.String())
	assert.Contains(t, stderr.String(), "frame 2")
	assert.Contains(t, stderr.String(), "f32")
}

// TestKilledRankOthersGoOn: kill -9 a worker mid-run; the others drop it
// and finish every round.
func TestKilledRankOthersGoOn(t *testing.T) {
	for _, victim := range []int{2, 0} {
		t.Run(fmt.Sprintf("victim=%d", victim), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			procs := startRun(t, ctx, 4, toyArgs("--rounds", "1000", "--compute", "10ms", "--delay", "uniform:0ms,10ms", "--dim", "4096", "--timeout", "10s"))
			waitRunning(t, procs)
			require.NoError(t, procs[victim].Cmd.Process.Signal(syscall.SIGKILL))
			errs := make([]error, len(procs))
			for r, p := range procs {
				errs[r] = p.Cmd.Wait()
			}
			for r := range procs {
				if r != victim && errs[r] != nil {
					// Every survivor's log (with its goroutine dump if it
					// hung), not only the first failing one's.
					for q, pq := range procs {
						if q != victim {
							t.Logf("rank %d (%v):\n%s", q, errs[q], pq.Stderr.String())
						}
					}
					t.FailNow()
				}
			}
			for r, p := range procs {
				if r == victim {
					continue
				}
				rep := p.rep(t)
				assert.NotContains(t, rep.Alive, victim)
				assert.GreaterOrEqual(t, rep.Rounds, 990, "rank %d", r)
				recs := rounds(t, p.Stdout.Bytes())
				assert.LessOrEqual(t, recs[len(recs)-1].vals["contributors"], 3.0)
				// Every worker has a gradient within ~20 ms: the run must
				// not have needed the controller's last-resort deadlines
				// (which would hide a lost message behind a 10 s stall).
				assert.NotContains(t, p.Stderr.String(), "no probed worker answered within the timeout", "rank %d", r)
				assert.NotContains(t, p.Stderr.String(), "round not done in time", "rank %d", r)
			}
		})
	}
}

// TestHungProbeExpires: rank 3 takes 30 s per iteration; with one probe
// per round and --probe-timeout, a probe sent to it expires and another
// worker triggers the round, so the run ends long before rank 3's first
// gradient.
func TestHungProbeExpires(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	procs := startRun(t, ctx, 4, toyArgs("--rounds", "40", "--probes", "1", "--probe-timeout", "50ms", "--compute", "5ms", "--slow", "ranks=3,s=6000"))
	for r, p := range procs {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
	}
	assert.Less(t, time.Since(start), 25*time.Second)
	assert.Contains(t, procs[0].Stderr.String(), "probe expired")
	assert.Equal(t, 0, procs[3].rep(t).Contributions)
}

// TestSeparateController: rank 0 runs `straggle controller`, ranks 1–3
// train.
func TestSeparateController(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	procs := startRun(t, ctx, 4, func(r int) []string {
		if r == 0 {
			return []string{"controller", "--controller", "separate", "--rounds", "30"}
		}
		return toyArgs("--controller", "separate", "--rounds", "30", "--compute", "5ms")(r)
	})
	for r, p := range procs {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
	}
	for r := 1; r < 4; r++ {
		recs := rounds(t, procs[r].Stdout.Bytes())
		require.Len(t, recs, 30)
		for _, rec := range recs {
			assert.NotEqual(t, 0.0, rec.vals["initiator"])
			assert.LessOrEqual(t, rec.vals["members"], 3.0)
		}
	}
}

// TestGroupsAgree: in groups mode every rank derives the same groups.
func TestGroupsAgree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	procs := startRun(t, ctx, 4, toyArgs("--mode", "groups", "--rounds", "20", "--compute", "3ms"))
	groups := map[int64]map[int]string{}
	for r, p := range procs {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
		for _, rec := range rounds(t, p.Stdout.Bytes()) {
			if groups[rec.round] == nil {
				groups[rec.round] = map[int]string{}
			}
			groups[rec.round][r] = rec.labels["group"]
			assert.Contains(t, strings.Split(rec.labels["group"], ","), fmt.Sprint(r))
		}
	}
	require.Len(t, groups, 20)
	for k, byRank := range groups {
		for r, g := range byRank {
			for _, m := range strings.Split(g, ",") {
				var mr int
				fmt.Sscan(m, &mr)
				assert.Equal(t, g, byRank[mr], "round %d: rank %d and %d disagree", k, r, mr)
			}
		}
	}
}

// TestRNAHierarchical: ranks 0 and 1 are 8× slower; rna-h profiles,
// splits the workers into {2,3} and {0,1}, runs RNA inside each group
// (rings of 2) and joins them through the parameter server; replicas agree inside a
// group.
func TestRNAHierarchical(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	procs := startRun(t, ctx, 4, toyArgs("--mode", "rna-h", "--rounds", "120", "--compute", "10ms", "--delay", "uniform:0ms,5ms", "--slow", "k=2,s=8", "--ps-period", "3", "--profile", "3"))
	for r, p := range procs {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
	}
	require.Contains(t, procs[0].Stderr.String(), `groups="[[2 3] [0 1]]"`)
	loss := make([]float64, 4)
	for r, p := range procs {
		recs := rounds(t, p.Stdout.Bytes())
		require.NotEmpty(t, recs)
		// After the regroup every round is a ring of the two of a group.
		last := recs[len(recs)-1]
		assert.Equal(t, 2.0, last.vals["members"], "rank %d", r)
		loss[r] = p.rep(t).FinalLoss
	}
	assert.Equal(t, loss[0], loss[1])
	assert.Equal(t, loss[2], loss[3])
	// The fast group ran more rounds than the slow one.
	assert.Greater(t, procs[2].rep(t).Rounds, procs[0].rep(t).Rounds)
}

// TestStoppedRankDropped: SIGSTOP a worker (hung, not dead): rank 0's
// heartbeats drop it after the silence, the others finish without it,
// and when it resumes it learns it was dropped and exits with code 3.
func TestStoppedRankDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	procs := startRun(t, ctx, 4, toyArgs("--rounds", "600", "--compute", "10ms", "--delay", "uniform:0ms,10ms", "--timeout", "4s"))
	waitRunning(t, procs)
	const victim = 3
	require.NoError(t, procs[victim].Cmd.Process.Signal(syscall.SIGSTOP))
	for r, p := range procs {
		if r == victim {
			continue
		}
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
		rep := p.rep(t)
		assert.NotContains(t, rep.Alive, victim, "rank %d", r)
		assert.Equal(t, 600, rep.Rounds, "rank %d", r)
	}
	require.NoError(t, procs[victim].Cmd.Process.Signal(syscall.SIGCONT))
	err := procs[victim].Cmd.Wait()
	assert.Equal(t, 3, clitest.ExitCode(err), procs[victim].Stderr.String())
	assert.Contains(t, procs[victim].Stderr.String(), "dropped")
}

// TestStalenessBound (R5, R12): with η = 1 the 8× slower rank's gradients
// are staler than the bound by the time they are ready and are dropped
// (counted), and nothing staler than η is ever contributed.
func TestStalenessBound(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	procs := startRun(t, ctx, 3, toyArgs("--rounds", "80", "--eta", "1", "--compute", "5ms", "--slow", "k=1,s=8"))
	for r, p := range procs {
		require.NoError(t, p.Cmd.Wait(), "rank %d: %s", r, p.Stderr.String())
	}
	recs := rounds(t, procs[0].Stdout.Bytes())
	require.Len(t, recs, 80)
	for _, rec := range recs {
		if rec.contributed {
			assert.LessOrEqual(t, rec.vals["staleness"], 1.0, "round %d", rec.round)
		}
	}
	assert.Greater(t, recs[len(recs)-1].vals["dropped_stale"], 0.0)
}
