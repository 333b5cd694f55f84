package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/straggle/internal/engine"
	"trainwire.dev/tools/straggle/internal/inject"
)

// SyncFlags are the flags sync and controller share: every rank of a run
// must give the same values.
type SyncFlags struct {
	Mode     string `help:"rna: RNA (probes, non-blocking global ring with null gradients); rna-h: RNA inside fast/slow groups joined by an asynchronous parameter server (toy only); groups: random-group partial allreduce from the shared seed; allreduce: blocking ring allreduce (lib/collective)." enum:"rna,rna-h,groups,allreduce" default:"rna" env:"TRAINWIRE_STRAGGLE_MODE"`
	PSPeriod int    `name:"ps-period" help:"rna-h: a group pushes its model to the parameter server (the controller), which adds the group's progress to the global model and hands it back, every this many of its rounds." default:"10" env:"TRAINWIRE_STRAGGLE_PS_PERIOD"`
	Profile  int    `help:"rna-h: iterations each worker times before the groups are formed." default:"5" env:"TRAINWIRE_STRAGGLE_PROFILE"`
	RNAFlags
	Rounds     int     `help:"Stop after this many rounds (0: when every rank's input has ended, or at --target-loss)." default:"0" env:"TRAINWIRE_STRAGGLE_ROUNDS"`
	GroupSize  int     `help:"groups mode: ranks per group." default:"2" env:"TRAINWIRE_STRAGGLE_GROUP_SIZE"`
	Controller string  `help:"Where the controller runs: rank0 (rank 0 also trains) or separate (rank 0 runs 'straggle controller' and trains nothing)." enum:"rank0,separate" default:"rank0" env:"TRAINWIRE_STRAGGLE_CONTROLLER"`
	TargetLoss float64 `help:"Toy: stop once the loss is at most this (rna and allreduce); the report gives the time it was first reached." default:"0" env:"TRAINWIRE_STRAGGLE_TARGET_LOSS"`
	Dim        int     `help:"Toy: gradient elements (the stdin filter learns the size from its input)." default:"20" env:"TRAINWIRE_STRAGGLE_DIM"`
}

// RNAFlags are the flags of RNA's rounds that sync, controller and serve
// share: every rank of a run must give the same values.
type RNAFlags struct {
	Probes       int           `help:"Probes per round (q): 1 is a random initiator, 2 is RNA's power of two choices." default:"2" env:"TRAINWIRE_STRAGGLE_PROBES"`
	ProbeTimeout time.Duration `help:"When no probed worker answers within this, probe one more (hung probes expire); 0 keeps the thesis's behaviour (no expiry) up to --timeout, after which an unanswered probe expires too." default:"0s" env:"TRAINWIRE_STRAGGLE_PROBE_TIMEOUT"`
	Eta          int           `help:"Staleness bound η in rounds: a gradient computed more than η rounds before the one it would join is dropped; negative: no bound." default:"-1" env:"TRAINWIRE_STRAGGLE_ETA"`
	Accumulate   string        `help:"How several pending gradients of one worker combine: wavg (linearly weighted average, newest heaviest) or sum." enum:"wavg,sum" default:"wavg" env:"TRAINWIRE_STRAGGLE_ACCUMULATE"`
	Seed         uint64        `help:"Seed of probe sampling, groups and injected delays: the same seed replays the same choices." default:"1" env:"TRAINWIRE_STRAGGLE_SEED"`
}

// SyncCmd is the sync verb.
type SyncCmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`
	cli.WireFlags
	SyncFlags
	Inject inject.Flags `embed:""`

	Toy     string  `help:"Built-in trainer instead of stdin: 'quadratic' is the seed's toy f(x)=½‖x‖² with gradient x+N(0,σ²), x₀=1." enum:",quadratic" default:"" env:"TRAINWIRE_STRAGGLE_TOY"`
	Sigma   float64 `help:"Toy: gradient noise σ." default:"1"`
	LR      float64 `name:"lr" help:"Toy: learning rate γ per contributed gradient (update = γ·Σ contributed gradients)." default:"0.01"`
	Input   string  `help:"Gradient stream (dense f32 frames, one per tensor per iteration; '-' is stdin)." default:"-" type:"path"`
	Report  string  `help:"Write a JSON summary of this rank's run to this file." type:"path" env:"TRAINWIRE_STRAGGLE_REPORT"`
	Emit    string  `help:"What each round writes to stdout: all (stats then the averaged gradient), stats, or none." enum:"all,stats,none" default:"all"`
	Tensors int     `help:"Stdin: dense frames per iteration (one per tensor, same names and shapes every iteration); 0: each iteration ends with a step_end frame, and each round's output too." default:"1" env:"TRAINWIRE_STRAGGLE_TENSORS"`
}

// ControllerCmd runs only the controller, as rank 0 of a run whose
// workers use --controller separate.
type ControllerCmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`
	SyncFlags
}

// Run runs the dedicated controller.
func (c *ControllerCmd) Run(rio *cli.IO) error {
	rio.SetGrace(cli.ServiceGrace)
	c.Controller = "separate"
	if c.Mode != engine.ModeRNA {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("controller: only --mode rna has a controller"))
	}
	s := &SyncCmd{Launch: c.Launch, Mesh: c.Mesh, SyncFlags: c.SyncFlags, Emit: "none"}
	return s.run(rio, true)
}

// Run runs one rank of the synchronisation.
func (c *SyncCmd) Run(rio *cli.IO) error { return c.run(rio, false) }

func (c *SyncCmd) run(rio *cli.IO, controllerOnly bool) error {
	if err := c.check(controllerOnly); err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	model, err := c.Inject.Model()
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("sync: %w", err))
	}
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("sync: %w", err))
	}
	if err := c.checkPlace(env, controllerOnly); err != nil {
		return cli.WithCode(cli.ExitUsage, err)
	}
	// The trainer: the toy in-process, or the gradient stream.
	var src *streamSource
	dim := c.Dim
	if c.Toy == "" && !controllerOnly {
		in, closeIn, err := cli.OpenInput(c.Input, rio.Stdin)
		if err != nil {
			return err
		}
		defer closeIn()
		src = &streamSource{r: wire.NewReader(in, c.Limits()), tensors: c.Tensors}
		if err := src.learn(); err != nil {
			return err
		}
		dim = src.dim
	}
	cfgm := c.Mesh.Config(env, rio.Log)
	cfgm.Tolerant = c.Mode != engine.ModeAllreduce
	m, err := mesh.Open(rio.Ctx, cfgm)
	if err != nil {
		return err
	}
	defer m.Close()
	r := c.newRankRun(rio, m, src, dim, controllerOnly)
	if err := r.run(model); err != nil {
		return err
	}
	return r.finish()
}

// check refuses flag values no run can use.
func (c *SyncCmd) check(controllerOnly bool) error {
	switch {
	case c.Probes < 1 || c.GroupSize < 1 || c.Rounds < 0 || c.Dim < 1:
		return fmt.Errorf("sync: --probes, --group-size and --dim must be at least 1, --rounds at least 0")
	case c.Toy == "" && !controllerOnly && c.Tensors < 0:
		return fmt.Errorf("sync: --tensors must be at least 0")
	case c.Mode == engine.ModeRNAH && c.Toy == "" && !controllerOnly:
		return fmt.Errorf("sync: --mode rna-h exchanges the groups' models with a parameter server, and only the built-in trainer (--toy) holds one; use --mode rna with a gradient stream")
	case c.Mode == engine.ModeRNAH && (c.PSPeriod < 1 || c.Profile < 1):
		return fmt.Errorf("sync: --ps-period and --profile must be at least 1")
	case c.Mode == engine.ModeGroups && c.Rounds == 0:
		return fmt.Errorf("sync: --mode groups needs --rounds (with no coordinator, every rank must run the same rounds; a rank whose input ends joins the rest with null gradients)")
	}
	return nil
}

// checkPlace refuses a rank and world the controller layout cannot use.
func (c *SyncCmd) checkPlace(env launch.Env, controllerOnly bool) error {
	switch {
	case controllerOnly && env.Rank != 0:
		return fmt.Errorf("controller: must be rank 0 (it is rank %d)", env.Rank)
	case c.Controller == "separate" && env.World < 2:
		return fmt.Errorf("sync: --controller separate needs a world of at least 2 (the controller and a worker)")
	case c.Controller == "separate" && env.Rank == 0 && !controllerOnly:
		return fmt.Errorf("sync: with --controller separate, rank 0 runs 'straggle controller'")
	}
	return nil
}

// rankRun is one rank's run: the engine, the trainer (the toy or the
// gradient stream) that feeds it, what each round writes, and the report.
type rankRun struct {
	c     *SyncCmd
	rio   *cli.IO
	m     *mesh.Mesh
	src   *streamSource
	toy   *toyTrainer
	ecfg  engine.Config
	out   *output
	rep   *report
	start time.Time
	iters iterStats
	eng   *engine.Engine
}

func (c *SyncCmd) newRankRun(rio *cli.IO, m *mesh.Mesh, src *streamSource, dim int, controllerOnly bool) *rankRun {
	r := &rankRun{c: c, rio: rio, m: m, src: src, ecfg: c.engineConfig(m, dim, rio),
		rep: &report{Mode: c.Mode, Rank: m.Rank(), World: m.World(), Probes: c.Probes, TargetLoss: c.TargetLoss, TimeToTarget: -1}}
	stdout := rio.Stdout
	if c.Emit == "none" {
		stdout = io.Discard
	}
	r.out = &output{w: wire.NewWriter(stdout, "straggle"), emit: c.Emit, rank: m.Rank(), mode: c.Mode}
	if src != nil {
		r.out.layout, r.out.stepped = src.layout, src.stepped()
	}
	if c.Toy != "" && !controllerOnly {
		r.toy = newToy(dim, c.Sigma, c.LR, c.Seed, m.Rank())
		if r.ecfg.Hier {
			r.ecfg.Params, r.ecfg.SetParams = r.toy.params, r.toy.setParams
		}
	}
	return r
}

// engineConfig is the engine's configuration from the flags: rank 0 is the
// controller, and a worker too unless --controller separate.
func (c *SyncCmd) engineConfig(m *mesh.Mesh, dim int, rio *cli.IO) engine.Config {
	var workers []int
	for r := range m.World() {
		if r != 0 || c.Controller == "rank0" {
			workers = append(workers, r)
		}
	}
	mode := c.Mode
	if mode == engine.ModeRNAH {
		mode = engine.ModeRNA
	}
	ecfg := engine.Config{
		Mode: mode, Hier: c.Mode == engine.ModeRNAH, PSPeriod: c.PSPeriod, Probes: c.Probes, ProbeTimeout: c.ProbeTimeout, Eta: c.Eta, Sum: c.Accumulate == "sum",
		Controller: 0, Workers: workers, Rounds: c.Rounds, Seed: c.Seed, GroupSize: c.GroupSize, Dim: dim,
		Timeout: c.Mesh.Timeout, Log: rio.Log, TargetLoss: c.TargetLoss,
	}
	if c.Toy == "" {
		ecfg.TargetLoss = 0
	}
	return ecfg
}

// apply is the engine's callback for a finished round: the toy applies the
// averaged gradient (its loss goes into the report), and the round is
// written out.
func (r *rankRun) apply(res *engine.Result) float64 {
	loss := math.NaN()
	if r.toy != nil {
		loss = r.toy.apply(res.Sum)
		if r.rep.TimeToTarget < 0 && r.c.TargetLoss > 0 && loss <= r.c.TargetLoss {
			r.rep.TimeToTarget = time.Since(r.start).Seconds()
			r.rep.RoundsToTarget = int(res.Round)
		}
		r.rep.FinalLoss = loss
	}
	if err := r.out.round(res, loss); err != nil {
		r.rio.Log.Error("straggle: writing the round failed", "err", err)
	}
	return loss
}

// run runs the engine while the trainer computes (a worker), until the
// rounds end, the input ends or a failure.
func (r *rankRun) run(model *inject.Model) error {
	c, m := r.c, r.m
	r.start = time.Now()
	r.eng = engine.New(m, r.ecfg, r.apply)
	ctx, cancel := context.WithCancel(r.rio.Ctx)
	defer cancel()
	blocking := r.ecfg.Mode != engine.ModeRNA
	var computeErr error
	var wg sync.WaitGroup
	if r.eng.IsWorker() {
		rng := rand.New(rand.NewPCG(c.Seed, uint64(m.Rank())+1))
		wg.Go(func() {
			if r.toy != nil {
				r.toy.loop(ctx, r.eng, model, rng, m.Rank(), blocking, c.Profile, &r.iters)
			} else if computeErr = r.src.loop(ctx, r.eng, model, rng, m.Rank(), &r.iters); computeErr != nil {
				cancel()
			}
		})
	}
	runErr := r.eng.Run(ctx)
	cancel()
	wg.Wait()
	if computeErr != nil && !errors.Is(computeErr, context.Canceled) {
		if c.Mode == engine.ModeAllreduce {
			m.Abort(computeErr) // blocking allreduce cannot go on without this rank
		}
		return computeErr // a tolerant mesh drops this rank; the others go on
	}
	if runErr != nil && !(errors.Is(runErr, context.Canceled) && r.rio.Ctx.Err() == nil) {
		return runErr
	}
	return nil
}

// finish closes the output and writes the summary (log and --report). A
// rank the job dropped (stopped past the heartbeats) can resume, see every
// peer gone before it reads rank 0's verdict, take over as controller and
// finish alone: its results are not the job's (exit 3).
func (r *rankRun) finish() error {
	c, m, rep := r.c, r.m, r.rep
	if err := m.Err(); err != nil {
		return err
	}
	if err := r.out.w.Close(); err != nil {
		return err
	}
	rep.fill(r.eng, &r.iters, time.Since(r.start), m)
	r.rio.Log.Info("straggle: done", "mode", c.Mode, "rank", m.Rank(), "rounds", rep.Rounds, "round_ms_mean", fmt.Sprintf("%.2f", rep.RoundMsMean),
		"round_ms_p50", fmt.Sprintf("%.2f", rep.RoundMsP50), "contributors_mean", fmt.Sprintf("%.2f", rep.ContributorsMean), "iterations", rep.Iterations,
		"time_to_target_s", rep.TimeToTarget, "final_loss", rep.FinalLoss, "alive", m.Alive())
	if c.Report != "" {
		b, _ := json.MarshalIndent(rep, "", "  ")
		if err := os.WriteFile(c.Report, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// report is the JSON summary of one rank's run.
type report struct {
	Mode             string  `json:"mode"`
	Rank             int     `json:"rank"`
	World            int     `json:"world"`
	Alive            []int   `json:"alive"`
	Probes           int     `json:"probes"`
	Rounds           int     `json:"rounds"`
	RoundMsMean      float64 `json:"round_ms_mean"`
	RoundMsP50       float64 `json:"round_ms_p50"`
	RoundMsP95       float64 `json:"round_ms_p95"`
	ContributorsMean float64 `json:"contributors_mean"`
	Contributions    int     `json:"contributions"`
	Iterations       int     `json:"iterations"`
	IterMsMean       float64 `json:"iter_ms_mean"`
	IdleFraction     float64 `json:"idle_fraction"`
	TargetLoss       float64 `json:"target_loss"`
	TimeToTarget     float64 `json:"time_to_target_s"`
	RoundsToTarget   int     `json:"rounds_to_target"`
	FinalLoss        float64 `json:"final_loss"`
	WallS            float64 `json:"wall_s"`
}

func (r *report) fill(e *engine.Engine, it *iterStats, wall time.Duration, m *mesh.Mesh) {
	r.Alive = m.Alive()
	r.Rounds = len(e.RoundTimes)
	r.Contributions = e.Contribs
	r.WallS = wall.Seconds()
	if n := len(e.RoundTimes); n > 0 {
		ms := make([]float64, n)
		tot := 0.0
		for i, d := range e.RoundTimes {
			ms[i] = float64(d) / 1e6
			tot += ms[i]
		}
		slices.Sort(ms)
		r.RoundMsMean = tot / float64(n)
		r.RoundMsP50 = ms[n/2]
		r.RoundMsP95 = ms[min(n-1, int(math.Round(0.95*float64(n-1))))]
		w := 0
		for _, x := range e.Weights {
			w += x
		}
		r.ContributorsMean = float64(w) / float64(n)
	}
	it.mu.Lock()
	r.Iterations = it.n
	if it.n > 0 {
		r.IterMsMean = float64(it.busy) / 1e6 / float64(it.n)
	}
	if wall > 0 {
		r.IdleFraction = float64(it.idle) / float64(wall)
	}
	it.mu.Unlock()
	if math.IsNaN(r.FinalLoss) {
		r.FinalLoss = 0
	}
}

type iterStats struct {
	mu         sync.Mutex
	n          int
	busy, idle time.Duration
}

func (s *iterStats) add(busy, idle time.Duration) {
	s.mu.Lock()
	s.n++
	s.busy += busy
	s.idle += idle
	s.mu.Unlock()
}

// sleepCtx sleeps d unless ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func drawDur(model *inject.Model, rank int, rng *rand.Rand) time.Duration {
	return time.Duration(model.Draw(rank, rng) * float64(time.Millisecond))
}

// waitApplied blocks until the engine applied a round after v (the
// blocking modes' trainer waits for its update before the next
// iteration).
func waitApplied(ctx context.Context, eng *engine.Engine, v uint64) {
	for eng.Applied() <= v {
		select {
		case <-ctx.Done():
			return
		case <-eng.Stopped():
			return
		case <-time.After(200 * time.Microsecond):
		}
	}
}

// ------------------------------------------------------------------- toy

// toyTrainer is the seed's quadratic toy: f(x) = ½‖x‖², stochastic
// gradient x + N(0, σ²I), x₀ = 1, update x ← x − γ·Σ contributed
// gradients.
type toyTrainer struct {
	mu    sync.Mutex
	x     []float32
	sigma float64
	lr    float32
}

func newToy(dim int, sigma, lr float64, seed uint64, rank int) *toyTrainer {
	x := make([]float32, dim)
	for i := range x {
		x[i] = 1
	}
	return &toyTrainer{x: x, sigma: sigma, lr: float32(lr)}
}

func (t *toyTrainer) apply(sum []float32) float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	loss := 0.0
	for i, g := range sum {
		t.x[i] -= t.lr * g
		loss += float64(t.x[i]) * float64(t.x[i])
	}
	return loss / 2
}

func (t *toyTrainer) params() []float32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.x)
}

func (t *toyTrainer) setParams(p []float32) {
	t.mu.Lock()
	defer t.mu.Unlock()
	copy(t.x, p)
}

func (t *toyTrainer) loop(ctx context.Context, eng *engine.Engine, model *inject.Model, rng *rand.Rand, rank int, blocking bool, profile int, st *iterStats) {
	idleFrom := time.Now()
	var profBusy time.Duration
	n := 0
	for ctx.Err() == nil {
		select {
		case <-eng.Stopped():
			return
		default:
		}
		v := eng.Applied()
		t.mu.Lock()
		snap := slices.Clone(t.x)
		t.mu.Unlock()
		began := time.Now()
		idle := began.Sub(idleFrom)
		if !sleepCtx(ctx, drawDur(model, rank, rng)) {
			return
		}
		for i := range snap {
			snap[i] += float32(rng.NormFloat64() * t.sigma)
		}
		busy := time.Since(began)
		st.add(busy, idle)
		eng.Push(v, snap)
		if n++; n <= profile {
			profBusy += busy
			if n == profile {
				eng.Profile(float64(profBusy) / 1e6 / float64(profile))
			}
		}
		idleFrom = time.Now()
		if blocking {
			waitApplied(ctx, eng, v)
		}
	}
}
