package collective_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/tensor"
)

// benchRank is one rank of TestBenchProcs: allreduce of TW_BENCH_BYTES
// (default 64 MiB) TW_BENCH_ITERS times after 2 warmups, printing each
// time on stderr.
func benchRank(m *mesh.Mesh) {
	size, _ := strconv.Atoi(os.Getenv("TW_BENCH_BYTES"))
	if size == 0 {
		size = 64 << 20
	}
	iters, _ := strconv.Atoi(os.Getenv("TW_BENCH_ITERS"))
	if iters == 0 {
		iters = 10
	}
	seg, _ := strconv.Atoi(os.Getenv("TW_BENCH_SEGMENT"))
	c := collective.New(m, collective.Options{Segment: seg})
	data := tensor.Alloc(size / 4)
	for i := range data {
		data[i] = float32(i % 7)
	}
	ctx := context.Background()
	if path := os.Getenv("TW_BENCH_CPUPROFILE"); path != "" {
		f, err := os.Create(fmt.Sprintf("%s.%d", path, m.Rank()))
		if err == nil {
			_ = pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	var line []string
	var ru0 syscall.Rusage
	for it := range iters + 2 {
		if it == 2 {
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
		}
		if err := c.Barrier(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		t0 := time.Now()
		if err := c.AllReduce(ctx, data); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if it >= 2 {
			line = append(line, fmt.Sprintf("%.1f", time.Since(t0).Seconds()*1e3))
		}
	}
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	tv := func(a, b syscall.Timeval) float64 { return float64(b.Sec-a.Sec)*1e3 + float64(b.Usec-a.Usec)/1e3 }
	fmt.Fprintf(os.Stderr, "rank %d cpu/iter user %.1f sys %.1f ms; ms: %s\n", m.Rank(),
		tv(ru0.Utime, ru1.Utime)/float64(iters), tv(ru0.Stime, ru1.Stime)/float64(iters), strings.Join(line, " "))
	_ = c.Barrier(ctx)
	_ = m.Close()
}

// TestBenchProcs times allreduce with 4 rank processes (set TW_BENCH=1;
// TW_BENCH_BYTES, TW_BENCH_ITERS, TW_BENCH_SEGMENT tune it). It is a
// measurement, not a test: it asserts nothing about time.
func TestBenchProcs(t *testing.T) {
	if os.Getenv(envBench) == "" {
		t.Skip("set TW_BENCH=1 to run the multi-process allreduce benchmark")
	}
	procs := startRanksEnv(t, 4, nil)
	for r, p := range procs {
		<-p.done
		if p.err != nil {
			t.Errorf("rank %d: %v\n%s", r, p.err, p.output())
		}
		t.Log(strings.TrimSpace(p.output()))
	}
}
