package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/wire"

	"trainwire.dev/tools/hashsync/internal/scheme"
)

// SyncCmd is the filter: this rank's gradients in, the sums out.
type SyncCmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`
	cli.WireFlags

	SchemeFlags `embed:""`
	Average     bool   `help:"Divide the sum by the world size." env:"TRAINWIRE_AVERAGE"`
	Stats       string `help:"Write a stats frame per tensor and iteration to this file (- for stderr)." type:"path" env:"TRAINWIRE_STATS"`
	NoOverlap   bool   `help:"Hash tensor i+1 only after tensor i is synchronized (for measuring the overlap)."`
	Output      string `help:"Result form: same (as the input frame), sparse (COO) or dense." enum:"same,sparse,dense" default:"same" env:"TRAINWIRE_OUTPUT"`
	Barrier     bool   `help:"Wait for every rank before each tensor, and again after it before writing its sum (benchmarks: the stats times then exclude waiting for late input, and no rank's output work runs while another rank still synchronizes)."`
	CPUProfile  string `name:"cpu-profile" help:"Write a Go CPU profile of this rank to this file (go tool pprof)." type:"path" env:"TRAINWIRE_CPU_PROFILE"`
	Device      string `help:"Where zen's hashing (Algorithm 1) runs: cpu, gpu or gpu:N (GPU N; binaries built with -tags cuda, bin/hashsync-cuda). Results are the same; ranks may differ." default:"cpu" env:"TRAINWIRE_HASHSYNC_DEVICE"`
}

// Run synchronizes every tensor of stdin and writes each sum to stdout,
// flushed, as soon as it has it; step ends pass through in order.
func (c *SyncCmd) Run(rio *cli.IO) error {
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("sync: %w", err))
	}
	cfg, err := c.config(env)
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("sync: %w", err))
	}
	cfg.Average = c.Average
	dev, err := c.openDevice()
	if err != nil {
		return fmt.Errorf("sync: %w", err)
	}
	if dev != nil {
		defer dev.Close()
		cfg.Partitioner = "hash" // the GPU runs Algorithm 1 (openDevice refused bucket)
	}
	stopProfile, err := cli.StartCPUProfile(c.CPUProfile)
	if err != nil {
		return err
	}
	defer stopProfile()
	statsW, closeStats, err := c.openStats(rio)
	if err != nil {
		return err
	}
	defer closeStats()
	// Every tensor allocates its messages and result afresh; collecting
	// less often is worth the memory (GOGC, when set, wins).
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	m, err := mesh.Open(rio.Ctx, c.Mesh.Config(env, rio.Log))
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := scheme.New(rio.Ctx, m, cfg)
	if err != nil {
		return err
	}
	if dev != nil {
		s.UseHasher(&gpuHasher{dev: dev})
		rio.Log.Info("sync: hashing on the GPU", "device", dev.Name(), "scheme", c.Scheme)
	}
	rio.Log.Debug("sync: mesh up", "rank", m.Rank(), "world", m.World(), "scheme", c.Scheme, "transport", m.Transport())
	ctx, cancel := context.WithCancel(rio.Ctx)
	defer cancel()
	r := c.newSyncRun(ctx, rio, m, s, statsW)
	go r.read()
	if err := r.loop(); err != nil {
		return err
	}
	return r.finish()
}

// openStats opens the --stats stream (nil when not asked for) and returns
// what closes its file.
func (c *SyncCmd) openStats(rio *cli.IO) (*wire.Writer, func(), error) {
	if c.Stats == "" {
		return nil, func() {}, nil
	}
	if c.Stats == "-" {
		return wire.NewWriter(rio.Stderr, "hashsync sync"), func() {}, nil
	}
	f, err := os.Create(c.Stats)
	if err != nil {
		return nil, nil, err
	}
	return wire.NewWriter(f, "hashsync sync"), func() { f.Close() }, nil
}

// syncItem is what the reader hands the sync loop: a prepared tensor and
// the form it came in, a step end, or the input's error.
type syncItem struct {
	p    *scheme.Prepared
	fm   form
	step *wire.StepEnd
	err  error
}

// syncRun is one `hashsync sync`: a reader goroutine decodes and prepares
// (hashes) tensor i+1 while the loop has tensor i on the network. A
// step_end travels in order with the tensors: it is passed on after the
// answers to the tensors before it.
type syncRun struct {
	c      *SyncCmd
	ctx    context.Context
	rio    *cli.IO
	m      *mesh.Mesh
	s      *scheme.Syncer
	rank   int
	statsW *wire.Writer
	w      *wire.Writer
	items  chan syncItem
	next   chan struct{} // --no-overlap: the last tensor's sum is out
	// What the loop has done: bytes received per phase, dense result
	// buffers per tensor name, time in Sync, tensors synced.
	total    map[string]int64
	bufs     map[string]*denseBuf
	syncTime time.Duration
	n        int
	bar      *cli.Progress // input bytes read, on a terminal
}

func (c *SyncCmd) newSyncRun(ctx context.Context, rio *cli.IO, m *mesh.Mesh, s *scheme.Syncer, statsW *wire.Writer) *syncRun {
	depth := 1
	if c.NoOverlap {
		depth = 0
	}
	return &syncRun{c: c, ctx: ctx, rio: rio, m: m, s: s, rank: m.Rank(), statsW: statsW,
		w: wire.NewWriter(rio.Stdout, "hashsync sync"), items: make(chan syncItem, depth), next: make(chan struct{}, 1),
		total: map[string]int64{}, bufs: map[string]*denseBuf{}, bar: rio.Progress("sync", cli.ReaderSize(rio.Stdin), true)}
}

// read decodes stdin into items until its end, the first bad frame, or
// the loop's end.
func (r *syncRun) read() {
	defer close(r.items)
	rd := wire.NewReader(r.rio.Stdin, r.c.Limits())
	synced := false // the last item was a tensor: --no-overlap waits for its sum
	for {
		if r.c.NoOverlap && synced {
			select {
			case <-r.next:
			case <-r.ctx.Done():
				return
			}
		}
		f, err := rd.NextFrame()
		r.bar.Set(rd.Offset())
		if err == io.EOF {
			return
		}
		switch f.(type) {
		case *wire.Header, *wire.End:
			synced = false
			continue
		}
		var it syncItem
		se, isStep := f.(*wire.StepEnd)
		synced = err == nil && !isStep
		if err != nil {
			it.err = cli.WithCode(cli.ExitBadInput, fmt.Errorf("sync: input: %w", err))
		} else if isStep {
			it.step = se
		} else if t, fm, err := toTensor(f, r.c.RowWidth); err != nil {
			it.err = cli.WithCode(cli.ExitBadInput, fmt.Errorf("sync: input frame %d: %w", rd.Frames()-1, err))
		} else {
			it.p, it.fm = r.s.Prepare(t), fm
		}
		select {
		case r.items <- it:
		case <-r.ctx.Done():
			return
		}
		if it.err != nil {
			return
		}
	}
}

// loop syncs the items as they come. A peer that dies while this rank
// waits for input must still end it: the mesh is polled between tensors.
func (r *syncRun) loop() error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		var it syncItem
		var ok bool
		select {
		case it, ok = <-r.items:
		case <-tick.C:
			if err := r.m.Err(); err != nil {
				return fmt.Errorf("sync: waiting for input: %w", err)
			}
			continue
		}
		if !ok {
			return nil
		}
		if it.err != nil {
			r.m.Abort(fmt.Errorf("rank %d: bad input: %w", r.rank, it.err))
			return it.err
		}
		if it.step != nil {
			if err := endStep(r.w, r.statsW, it.step.Step); err != nil {
				return err
			}
			continue
		}
		if err := r.syncOne(it); err != nil {
			return err
		}
	}
}

// outForm is the form tensor it's result leaves in (--output).
func (r *syncRun) outForm(it syncItem) form {
	fm := it.fm
	switch {
	case r.c.Output == "dense" && !fm.dense:
		fm.dense = true
		if len(fm.shape) == 0 {
			fm.shape = []int64{int64(it.p.T.Rows * it.p.T.Width)}
		}
	case r.c.Output == "sparse" && fm.dense:
		fm.dense = false
	}
	return fm
}

// syncOne syncs one tensor and writes its sum (and stats), flushed: the
// caller may be waiting for the answer before it writes the next tensor.
func (r *syncRun) syncOne(it syncItem) error {
	if r.c.Barrier {
		if err := r.s.Barrier(r.ctx); err != nil {
			return err
		}
	}
	fm := r.outForm(it)
	buf := r.bufs[it.p.T.Name]
	if buf == nil {
		buf = &denseBuf{}
		r.bufs[it.p.T.Name] = buf
	}
	if fm.dense && it.p.T.Rows*it.p.T.Width > 0 {
		// The result lands straight in the reused dense buffer.
		it.p.DenseOut = buf.take(it.p.T.Rows, it.p.T.Width)
	}
	t0 := time.Now()
	out, st, err := r.s.Sync(r.ctx, it.p)
	if err != nil {
		var me *scheme.MismatchError
		if errors.As(err, &me) {
			return err
		}
		return fmt.Errorf("sync: tensor %q (#%d): %w", it.p.T.Name, r.n, err)
	}
	t1 := time.Now()
	r.syncTime += t1.Sub(t0)
	st.Times["total"] = t1.Sub(t0).Seconds()
	if r.c.Barrier {
		// Every rank's sync is over before any converts and writes its
		// sum: on a host shared by ranks that work would slow the ones
		// still timing (as separate hosts would not).
		if err := r.s.Barrier(r.ctx); err != nil {
			return err
		}
		t1 = time.Now()
	}
	if r.c.NoOverlap {
		r.next <- struct{}{}
	}
	if out.DenseVal != nil {
		buf.prev = append(buf.prev[:0], out.Idx...)
	}
	frame := toFrame(out, fm, r.rank, buf)
	st.Times["output"] = time.Since(t1).Seconds()
	t2 := time.Now()
	if err := r.w.Write(frame); err != nil {
		return err
	}
	r.s.Release(out) // written out: its values serve a later result
	st.Times["write"] = time.Since(t2).Seconds()
	for ph, b := range st.Recv {
		r.total[ph] += b
	}
	if r.statsW != nil {
		if err := r.statsW.Write(statsFrame(out.Name, it.fm.step, r.rank, st)); err != nil {
			return err
		}
	}
	if err := flush(r.w, r.statsW); err != nil {
		return err
	}
	r.n++
	return nil
}

// finish agrees the end with every rank, closes the streams and logs the
// bytes received per phase.
func (r *syncRun) finish() error {
	if err := r.s.Finish(); err != nil {
		return err
	}
	r.bar.Done()
	if err := r.w.Close(); err != nil {
		return err
	}
	if r.statsW != nil {
		if err := r.statsW.Close(); err != nil {
			return err
		}
	}
	phases := make([]string, 0, len(r.total))
	for ph := range r.total {
		phases = append(phases, ph)
	}
	sort.Strings(phases)
	args := []any{"rank", r.rank, "scheme", r.c.Scheme, "tensors", r.n, "sync_s", r.syncTime.Seconds()}
	for _, ph := range phases {
		args = append(args, "recv_"+ph, r.total[ph])
	}
	r.rio.Log.Info("sync: done", args...)
	return r.m.Close()
}

// flush flushes the sums and the stats (when written).
func flush(w, statsW *wire.Writer) error {
	if err := w.Flush(); err != nil {
		return err
	}
	if statsW != nil {
		return statsW.Flush()
	}
	return nil
}

// endStep passes a step_end on to the sums and the stats, flushed.
func endStep(w, statsW *wire.Writer, step int64) error {
	if err := w.EndStep(step); err != nil {
		return err
	}
	if statsW != nil {
		return statsW.EndStep(step)
	}
	return nil
}

// statsFrame is one tensor's synchronization as a stats frame.
func statsFrame(name string, step int64, rank int, st *scheme.Stats) *wire.Stats {
	v := map[string]float64{
		"local_rows": float64(st.LocalRows), "out_rows": float64(st.OutRows),
		"push_imbalance": st.PushImbalance, "pull_imbalance": st.PullImbalance,
		"serial_writes": float64(st.Serial), "overflow": float64(st.Overflow),
	}
	if st.LocalRows > 0 {
		v["serial_fraction"] = float64(st.Serial) / float64(st.LocalRows)
	}
	for ph, b := range st.Sent {
		v["sent_bytes."+ph] = float64(b)
	}
	for ph, b := range st.Recv {
		v["recv_bytes."+ph] = float64(b)
	}
	for ph, bs := range st.SentPeer {
		for p, b := range bs {
			if b != 0 {
				v[fmt.Sprintf("sent_bytes.%s.to%d", ph, p)] = float64(b)
			}
		}
	}
	for ph, bs := range st.RecvPeer {
		for p, b := range bs {
			if b != 0 {
				v[fmt.Sprintf("recv_bytes.%s.from%d", ph, p)] = float64(b)
			}
		}
	}
	for ph, s := range st.Times {
		v["time_s."+ph] = s
	}
	labels := map[string]string{"scheme": st.Scheme}
	if st.Choice != "" {
		labels["choice"] = st.Choice
		v["density"], v["gamma"], v["rule_lhs"], v["rule_rhs"] = st.Density, st.Gamma, st.LHS, st.RHS
	}
	if st.Rule != "" {
		labels["rule"] = st.Rule
	}
	if st.ZenS > 0 {
		v["auto_zen_s"], v["auto_trial_s"] = st.ZenS, st.TrialS
	}
	return &wire.Stats{Tool: "hashsync", Name: name, Step: step, Rank: int64(rank), Values: v, Labels: labels}
}
