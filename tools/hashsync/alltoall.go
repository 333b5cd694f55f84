package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/wire"
)

// AllToAllCmd is the alltoall filter (docs/sven.md): each alltoall is two
// input frames, an i64 dense frame "<name>.splits" of world split sizes
// (rows for each rank) and the dense frame "<name>" of rows; the answer is
// the same two frames with the rows received from each rank, in rank
// order: what torch's all_to_all_single(out, in, output_split_sizes,
// input_split_sizes) computes.
type AllToAllCmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`
	cli.WireFlags

	Mode     string        `help:"async: two of Sven's scatter-based alltoallvs (the split sizes, then the rows); sync: the same two with the synchronous pairwise alltoallv (the baseline); scatter: one asynchronous alltoall whose parts carry their lengths." enum:"async,sync,scatter" default:"async"`
	MaxPart  cli.ByteSize  `help:"Largest part accepted from one rank (scatter mode), and largest split announced." default:"1GiB"`
	Repeat   int           `help:"Run each alltoall this many times (benchmarks: every run timed in --stats; the answer is written once)." default:"1"`
	Barrier  bool          `help:"Wait for every rank before each run (benchmarks: start the ranks together, before --late-by)."`
	LateRank int           `help:"Benchmarks: this rank sleeps --late-by before each run, after the barrier (a rank arriving late)." default:"-1"`
	LateBy   time.Duration `help:"How late --late-rank arrives." default:"0s"`
	Stats    string        `help:"Write a stats frame per run (ns, payload bytes) to this file (- for stderr)." type:"path"`
	Inputs   []string      `arg:"" optional:"" help:"Input streams (default stdin)." type:"path"`
}

// a2aJob is one rank's part in one alltoall: rows cut by splits.
type a2aJob struct {
	name     string
	splits   []int64 // rows to each rank
	rowBytes int
	rest     []int64 // the shape after the first dimension
	frame    *wire.Dense
}

// Run answers every pair of frames of the input.
func (c *AllToAllCmd) Run(rio *cli.IO) error {
	if c.Repeat < 1 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("alltoall: --repeat must be at least 1"))
	}
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("alltoall: %w", err))
	}
	var statsW *wire.Writer
	if c.Stats != "" {
		out, done, err := openStats(c.Stats, rio.Stderr)
		if err != nil {
			return err
		}
		defer done()
		statsW = wire.NewWriter(out, "hashsync alltoall")
		defer statsW.Close()
	}
	m, err := mesh.Open(rio.Ctx, c.Mesh.Config(env, rio.Log))
	if err != nil {
		return err
	}
	defer m.Close()
	comm := collective.New(m, collective.Options{})
	rio.Log.Info("alltoall: mesh up", "rank", m.Rank(), "world", m.World(), "mode", c.Mode, "transport", m.Transport())
	w := wire.NewWriter(rio.Stdout, "hashsync alltoall")
	r := &a2aRunner{cmd: c, comm: comm, out: w, stats: statsW, ctx: rio.Ctx}
	f := cli.StepFilter{Out: w, Frame: r.frame}
	err = f.Run(c.Inputs, rio.Stdin, c.Limits())
	if err == nil && r.pending != nil {
		err = cli.WithCode(cli.ExitBadInput, fmt.Errorf("alltoall: input ends after the split sizes %q, without their rows", r.pending.Name))
	}
	if err != nil && exit.CodeOf(err) == exit.BadInput {
		m.Abort(fmt.Errorf("rank %d: bad input: %w", m.Rank(), err))
	}
	return cli.EndStream(w, err)
}

func openStats(name string, stderr io.Writer) (io.Writer, func(), error) {
	if name == "-" {
		return stderr, func() {}, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { _ = f.Close() }, nil
}

// a2aRunner pairs the input frames and runs their alltoalls.
type a2aRunner struct {
	cmd     *AllToAllCmd
	comm    *collective.Comm
	out     *wire.Writer
	stats   *wire.Writer
	ctx     context.Context
	pending *wire.Dense // the split sizes waiting for their rows
	frames  int
}

func (r *a2aRunner) frame(f wire.Frame) error {
	r.frames++
	d, ok := f.(*wire.Dense)
	if !ok {
		return cli.WithCode(cli.ExitBadInput, fmt.Errorf("alltoall: data frame %d is %s, want dense", r.frames, f.Type()))
	}
	if r.pending == nil {
		if !strings.HasSuffix(d.Name, ".splits") {
			return cli.WithCode(cli.ExitBadInput, fmt.Errorf("alltoall: data frame %d (%q): want the split sizes \"<name>.splits\" first", r.frames, d.Name))
		}
		r.pending = d
		return nil
	}
	job, err := newJob(r.pending, d, r.comm.World())
	r.pending = nil
	if err != nil {
		return cli.WithCode(cli.ExitBadInput, fmt.Errorf("alltoall: data frame %d: %w", r.frames, err))
	}
	var got *wire.Dense
	var recvSplits []int64
	for run := range r.cmd.Repeat {
		if got, recvSplits, err = r.run(job, run); err != nil {
			return err
		}
	}
	return writeAnswer(r.out, job, recvSplits, got)
}

// newJob checks a pair of frames against each other and the world.
func newJob(sp, d *wire.Dense, world int) (*a2aJob, error) {
	name := strings.TrimSuffix(sp.Name, ".splits")
	if d.Name != name {
		return nil, fmt.Errorf("rows %q follow the split sizes of %q", d.Name, name)
	}
	if sp.DType != wire.I64 || len(sp.Shape) != 1 || sp.Shape[0] != int64(world) {
		return nil, fmt.Errorf("split sizes %q: want i64 of shape [%d] (the world), got %s %v", sp.Name, world, sp.DType, sp.Shape)
	}
	if len(d.Shape) == 0 {
		return nil, fmt.Errorf("rows %q: a scalar has no rows", name)
	}
	j := &a2aJob{name: name, frame: d, rest: d.Shape[1:], rowBytes: d.DType.Size()}
	for _, s := range j.rest {
		j.rowBytes *= int(s)
	}
	var total int64
	for k := range world {
		s := int64(binary.LittleEndian.Uint64(sp.Data[8*k:]))
		if s < 0 || s > d.Shape[0] {
			return nil, fmt.Errorf("split sizes %q: %d rows for rank %d, of %d", sp.Name, s, k, d.Shape[0])
		}
		total += s
		j.splits = append(j.splits, s)
	}
	if total != d.Shape[0] {
		return nil, fmt.Errorf("split sizes %q sum to %d rows, %q has %d", sp.Name, total, name, d.Shape[0])
	}
	return j, nil
}

func writeAnswer(w *wire.Writer, j *a2aJob, recvSplits []int64, got *wire.Dense) error {
	sp := make([]byte, 8*len(recvSplits))
	for k, s := range recvSplits {
		binary.LittleEndian.PutUint64(sp[8*k:], uint64(s))
	}
	if err := w.Write(&wire.Dense{Name: j.name + ".splits", Rank: -1, DType: wire.I64, Shape: []int64{int64(len(recvSplits))}, Data: sp}); err != nil {
		return err
	}
	return w.Write(got)
}

// run runs one alltoall of j (after the benchmark's barrier and delay)
// and writes its stats frame.
func (r *a2aRunner) run(j *a2aJob, run int) (*wire.Dense, []int64, error) {
	c, m := r.cmd, r.comm.Mesh()
	if c.Barrier {
		if err := r.comm.Barrier(r.ctx); err != nil {
			return nil, nil, err
		}
	}
	// scatter mode receives from the start, as Sven's listening thread
	// does: parts from ranks that are ready land while this one computes
	// (sleeps, when it is the late rank).
	var early *collective.AsyncAllToAll
	if c.Mode == "scatter" {
		a, err := r.comm.StartAllToAll(r.ctx, int(c.MaxPart))
		if err != nil {
			return nil, nil, fmt.Errorf("alltoall: %q: %w", j.name, err)
		}
		early = a
	}
	if m.Rank() == c.LateRank {
		time.Sleep(c.LateBy)
	}
	before := m.Counters().Total()
	t0 := time.Now()
	var recvSplits []int64
	var data []byte
	var err error
	if early != nil {
		recvSplits, data, err = r.scatter(j, early)
	} else {
		recvSplits, data, err = r.exchange(j)
	}
	ns := time.Since(t0).Nanoseconds()
	if err != nil {
		return nil, nil, fmt.Errorf("alltoall: %q: %w", j.name, err)
	}
	var rows int64
	for _, s := range recvSplits {
		rows += s
	}
	got := &wire.Dense{Name: j.name, Rank: -1, DType: j.frame.DType, Shape: append([]int64{rows}, j.rest...), Data: data}
	if r.stats == nil {
		return got, recvSplits, nil
	}
	after := m.Counters().Total()
	return got, recvSplits, r.stats.Write(&wire.Stats{Tool: "hashsync", Name: "alltoall", Rank: int64(m.Rank()),
		Values: map[string]float64{"ns": float64(ns), "run": float64(run), "bytes_sent": float64(after.BytesSent - before.BytesSent),
			"bytes_recv": float64(after.BytesRecv - before.BytesRecv), "world": float64(m.World())},
		Labels: map[string]string{"mode": c.Mode, "tensor": j.name}})
}

// exchange moves the rows: the split sizes, then the rows.
func (r *a2aRunner) exchange(j *a2aJob) ([]int64, []byte, error) {
	alltoallv := r.comm.AllToAllVAsync
	if r.cmd.Mode == "sync" {
		alltoallv = r.comm.AllToAllVBytes
	}
	return exchangeRows(r.ctx, r.comm, alltoallv, j, int64(r.cmd.MaxPart))
}

// alltoallvFunc is Comm.AllToAllVAsync or Comm.AllToAllVBytes.
type alltoallvFunc func(ctx context.Context, send []byte, sendCounts []int, recv []byte, recvCounts []int) error

// exchangeRows runs j's two alltoallvs, the split sizes then the rows; a
// rank announcing more than maxPart bytes aborts the job.
func exchangeRows(ctx context.Context, comm *collective.Comm, alltoallv alltoallvFunc, j *a2aJob, maxPart int64) ([]int64, []byte, error) {
	n := comm.World()
	eights := make([]int, n)
	for k := range eights {
		eights[k] = 8
	}
	send := make([]byte, 8*n)
	for k, s := range j.splits {
		binary.LittleEndian.PutUint64(send[8*k:], uint64(s))
	}
	recv := make([]byte, 8*n)
	if err := alltoallv(ctx, send, eights, recv, eights); err != nil {
		return nil, nil, err
	}
	recvSplits := make([]int64, n)
	sendCounts, recvCounts := make([]int, n), make([]int, n)
	total := 0
	for k := range n {
		s := int64(binary.LittleEndian.Uint64(recv[8*k:]))
		if s < 0 || s > maxPart/int64(max(j.rowBytes, 1)) {
			err := fmt.Errorf("rank %d announced %d rows of %d bytes, over the bound of %d bytes (--max-part)", k, s, j.rowBytes, maxPart)
			comm.Mesh().Abort(err)
			return nil, nil, err
		}
		recvSplits[k] = s
		sendCounts[k], recvCounts[k] = int(j.splits[k])*j.rowBytes, int(s)*j.rowBytes
		total += recvCounts[k]
	}
	data := make([]byte, total)
	if err := alltoallv(ctx, j.frame.Data, sendCounts, data, recvCounts); err != nil {
		return nil, nil, err
	}
	return recvSplits, data, nil
}

// scatter posts the parts of one asynchronous alltoall a (parts carry
// their lengths) and collects what it received.
func (r *a2aRunner) scatter(j *a2aJob, a *collective.AsyncAllToAll) ([]int64, []byte, error) {
	n, me := len(j.splits), r.comm.Rank()
	offs := make([]int, n+1)
	for k, s := range j.splits {
		offs[k+1] = offs[k] + int(s)*j.rowBytes
	}
	for i := 1; i <= n; i++ { // rotation order: rank+1 first, this rank last
		k := (me + i) % n
		if err := a.Post(k, j.frame.Data[offs[k]:offs[k+1]]); err != nil {
			_, _ = a.Wait()
			return nil, nil, err
		}
	}
	parts, err := a.Wait()
	if err != nil {
		return nil, nil, err
	}
	recvSplits := make([]int64, len(parts))
	var data []byte
	for k, p := range parts {
		if j.rowBytes == 0 || len(p)%j.rowBytes != 0 {
			err := fmt.Errorf("rank %d sent %d bytes, not a whole number of %d-byte rows", k, len(p), j.rowBytes)
			r.comm.Mesh().Abort(err)
			return nil, nil, err
		}
		recvSplits[k] = int64(len(p) / j.rowBytes)
		data = append(data, p...)
	}
	return recvSplits, data, nil
}
