// Package check is the check verb the networked tools share: every rank
// of a job runs it; it opens the mesh and times and verifies ring
// allreduce. It is a package of its own so that a tool without a mesh
// links none.
package check

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"
	"trainwire.dev/lib/cli"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/launch"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/tensor"
)

// Cmd is the shared `check` verb: every rank of a job runs it (from
// torchrun, mpirun, srun or by hand); it opens the mesh, times ring
// allreduce at each size, verifies every element against the exact
// answer, and rank 0 reports.
type Cmd struct {
	Launch launch.Flags `embed:""`
	Mesh   mesh.Flags   `embed:""`

	Sizes   []cli.ByteSize `help:"Allreduce sizes in bytes (multiples of 4: float32), comma-separated; 1MiB = 2^20, 1MB = 10^6, 1M = 2^20." default:"1MiB,64MiB" sep:","`
	Iters   int            `help:"Timed iterations per size." default:"10"`
	Warmup  int            `help:"Untimed iterations per size, before the timed ones." default:"2"`
	Format  string         `help:"Report format on rank 0's stdout: table or json (one object per size per line)." enum:"table,json" default:"table"`
	Verify  bool           `help:"Check every element of every result against the exact sum (with --no-verify, correct only says that nothing failed)." default:"true" negatable:""`
	Segment cli.ByteSize   `help:"Largest pipelining segment of the ring, in bytes (a chunk is cut into at least four, of at least 256 KiB or this)." default:"1MiB"`
}

// Result is one line of check's JSON report.
type Result struct {
	Op         string  `json:"op"`
	Bytes      int64   `json:"bytes"`
	World      int     `json:"world"`
	Iters      int     `json:"iters"`
	Transport  string  `json:"transport"`
	TimeMean   float64 `json:"time_s_mean"`
	TimeMedian float64 `json:"time_s_median"`
	TimeMin    float64 `json:"time_s_min"`
	AlgBW      float64 `json:"algbw_GBps"`
	BusBW      float64 `json:"busbw_GBps"`
	Correct    bool    `json:"correct"`
}

// checkValue is rank r's input at index i: small integers, so every
// partial sum in any order is exact in float32 (|sum| ≤ 6·n(n+1)/2 < 2^24
// up to n = 1600 ranks), and the result can be checked exactly.
func checkValue(r, i int) float32 { return float32((r + 1) * (i%13 - 6)) }

// Run runs the check. Errors from peers exit with cli.ExitPeer, bad flags with
// cli.ExitUsage, wrong results with cli.ExitFailure.
func (c *Cmd) Run(rio *cli.IO) error {
	if c.Iters < 1 || c.Warmup < 0 {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("check: --iters must be at least 1 and --warmup at least 0"))
	}
	for _, s := range c.Sizes {
		if s < 0 || s%4 != 0 {
			return cli.WithCode(cli.ExitUsage, fmt.Errorf("check: size %d is not a whole number of float32 (a multiple of 4 bytes)", s))
		}
	}
	env, err := c.Launch.Resolve(os.Environ())
	if err != nil {
		return cli.WithCode(cli.ExitUsage, fmt.Errorf("check: %w", err))
	}
	m, err := mesh.Open(rio.Ctx, c.Mesh.Config(env, rio.Log))
	if err != nil {
		return err
	}
	defer m.Close()
	comm := collective.New(m, collective.Options{Segment: int(c.Segment)})
	rank, world := m.Rank(), m.World()
	rio.Log.Info("check: mesh up", "rank", rank, "world", world, "transport", m.Transport(), "source", env.Source)

	out := rio.Stdout
	if rank != 0 {
		out = io.Discard
	}
	if c.Format == "table" {
		fmt.Fprintf(out, "# allreduce (sum, float32), %d ranks, transport %s, %d iterations after %d warmup, verify %v\n", world, m.Transport(), c.Iters, c.Warmup, c.Verify)
		fmt.Fprintf(out, "%12s %12s %12s %12s %12s %12s %8s\n", "size", "mean", "median", "min", "algbw GB/s", "busbw GB/s", "correct")
	}
	enc := json.NewEncoder(out)
	allOK := true
	for _, size := range c.Sizes {
		res, err := c.one(rio, comm, int64(size))
		if err != nil {
			return err
		}
		allOK = allOK && res.Correct
		if c.Format == "json" {
			if err := enc.Encode(res); err != nil {
				return err
			}
		} else {
			fmt.Fprintf(out, "%12s %12s %12s %12s %12.3f %12.3f %8v\n", humanBytes(res.Bytes),
				humanSeconds(res.TimeMean), humanSeconds(res.TimeMedian), humanSeconds(res.TimeMin), res.AlgBW, res.BusBW, res.Correct)
		}
	}
	if err := comm.Barrier(rio.Ctx); err != nil {
		return err
	}
	if err := m.Close(); err != nil {
		return err
	}
	if !allOK {
		return fmt.Errorf("check: allreduce gave wrong results (see the report and the logs of the ranks concerned)")
	}
	return nil
}

// one times and verifies allreduce of size bytes on every rank and returns
// the job-wide result (meaningful on rank 0).
func (c *Cmd) one(rio *cli.IO, comm *collective.Comm, size int64) (Result, error) {
	ctx := rio.Ctx
	rank, world := comm.Rank(), comm.World()
	n := int(size / 4)
	data := tensor.Alloc(n)
	fill := func() {
		for i := range data {
			data[i] = checkValue(rank, i)
		}
	}
	fill()
	sumR := float32(world * (world + 1) / 2)
	bad := 0
	times := make([]float32, c.Iters)
	for it := range c.Warmup + c.Iters {
		if err := comm.Barrier(ctx); err != nil {
			return Result{}, err
		}
		t0 := time.Now()
		if err := comm.AllReduce(ctx, data); err != nil {
			return Result{}, err
		}
		dt := time.Since(t0)
		if it >= c.Warmup {
			times[it-c.Warmup] = float32(dt.Seconds())
		}
		if c.Verify {
			// Every rank's allreduce is over before any verifies: checking
			// and refilling take a few ms of CPU a rank, which on a host
			// shared by several ranks slowed the ones still timing
			// (4 ranks on 2 cores, 4 MiB: 87 against 93 % of the link).
			if err := comm.Barrier(ctx); err != nil {
				return Result{}, err
			}
			for i, v := range data {
				if want := sumR * float32(i%13-6); v != want {
					if bad == 0 {
						rio.Log.Error("check: wrong allreduce result", "size", size, "iteration", it, "index", i, "got", v, "want", want)
					}
					bad++
					break
				}
			}
			fill()
		}
	}
	// Job-wide: the time of an iteration is the slowest rank's; the result
	// is correct if it is on every rank.
	all := make([]float32, world*c.Iters)
	if err := comm.AllGather(ctx, times, all); err != nil {
		return Result{}, err
	}
	flag := []float32{float32(min(bad, 1))}
	if err := comm.AllReduce(ctx, flag); err != nil {
		return Result{}, err
	}
	iter := make([]float64, c.Iters)
	for it := range c.Iters {
		for r := range world {
			iter[it] = math.Max(iter[it], float64(all[r*c.Iters+it]))
		}
	}
	res := Result{Op: "allreduce", Bytes: size, World: world, Iters: c.Iters, Transport: comm.Mesh().Transport(), Correct: flag[0] == 0}
	sorted := slices.Clone(iter)
	slices.Sort(sorted)
	for _, t := range iter {
		res.TimeMean += t / float64(len(iter))
	}
	res.TimeMin = sorted[0]
	if k := len(sorted); k%2 == 1 {
		res.TimeMedian = sorted[k/2]
	} else {
		res.TimeMedian = (sorted[k/2-1] + sorted[k/2]) / 2
	}
	if res.TimeMean > 0 {
		res.AlgBW = float64(size) / res.TimeMean / 1e9
		res.BusBW = res.AlgBW * 2 * float64(world-1) / float64(world)
	}
	if !c.Verify {
		res.Correct = true // not checked: the key still says the run did not fail
	}
	return res, nil
}

func humanBytes(b int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(b), 0
	for v >= 1024 && u < len(units)-1 && math.Mod(v, 1024) == 0 {
		v /= 1024
		u++
	}
	return strings.TrimSuffix(fmt.Sprintf("%g %s", v, units[u]), " ")
}

func humanSeconds(s float64) string {
	switch {
	case s >= 1:
		return fmt.Sprintf("%.3f s", s)
	case s >= 1e-3:
		return fmt.Sprintf("%.3f ms", s*1e3)
	default:
		return fmt.Sprintf("%.1f us", s*1e6)
	}
}
