package analysis

import (
	"os"
	"path/filepath"
	"testing"

	"trainwire.dev/tools/profiler/internal/classify"
	"trainwire.dev/tools/profiler/internal/trace"
)

func load(t *testing.T, dir string) []*Rank {
	t.Helper()
	c, err := classify.New(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	files, err := trace.Expand([]string{filepath.Join("..", "..", "testdata", dir)})
	if err != nil {
		t.Fatal(err)
	}
	ranks, err := Load(files, LoadOptions{Classifier: c, Rank: -1})
	if err != nil {
		t.Fatal(err)
	}
	return ranks
}

func eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

const us = 1000 // ns

// TestHandComputed checks every analysis of the synthetic timeline
// (testdata/synth/make.py) against interval arithmetic done by hand. Per
// iteration (offset 0 and 1000 µs), rank 0:
//
//	stream 7 : Memcpy [50,80]  K1 [100,300]  K2 [320,500]  K3 [700,800]
//	stream 20: AllReduce [250,650]            (rank 1: [300,650])
//	launches : memcpy [40,45] K1 [90,95] K2 [96,99] K3 [650,660] AllReduce [240,245]
//
// span = 1800 − 50 = 1750; busy = 2·(30 + |[100,650]| + 100) = 2·680 = 1360;
// idle = 390; compute = 2·(200+180+100) = 960; non-compute = 1750−960−390 = 400;
// comm = 800, comm∩compute = 2·(|[250,300]| + |[320,500]|) = 2·230 = 460 (57.5 %).
// Stream 7 gaps: 20 before K1 (its launch at 90 > 80: host wait), 20 before
// K2 (launched at 96 < 300, short: kernel wait), 200 before K3 (launched at
// 650 > 500: host wait), 250 between iterations (memcpy launched at 1040 >
// 800: host wait) → host 2·220+250 = 690, kernel 2·20 = 40.
// Stream 20: one gap 650 → 1250, launched at 1240: host wait 600.
// Launch delays (kernel start − launch end): 5, 5, 221, 40, 5 → mean 55.2,
// max 221, two over 100 µs (K2, twice).
func TestHandComputed(t *testing.T) {
	for _, v := range []string{"kineto-2024", "kineto-2023", "kineto-2022", "kineto-rocm"} {
		t.Run(v, func(t *testing.T) {
			s := Summarize(load(t, filepath.Join("synth", v)), DefaultOptions)
			if len(s.Ranks) != 2 {
				t.Fatalf("%d ranks", len(s.Ranks))
			}
			r := s.Ranks[0]
			eq(t, "rank", r.Rank, int64(0))
			eq(t, "device", r.Device, "gpu")
			eq(t, "clock", r.Clock, "absolute")
			eq(t, "iterations", r.Iterations.Count, 2)
			eq(t, "iteration mean", r.Iterations.MeanNS, int64(900*us))
			tp := r.Temporal
			eq(t, "span", tp.SpanNS, int64(1750*us))
			eq(t, "busy", tp.BusyNS, int64(1360*us))
			eq(t, "idle", tp.IdleNS, int64(390*us))
			eq(t, "compute", tp.ComputeNS, int64(960*us))
			eq(t, "non-compute", tp.NonComputeNS, int64(400*us))
			eq(t, "comm", tp.CommNS, int64(800*us))
			eq(t, "memory", tp.MemoryNS, int64(60*us))
			eq(t, "overlap", r.Overlap.OverlapNS, int64(460*us))
			if r.Overlap.Pct == nil || *r.Overlap.Pct != 57.5 {
				t.Errorf("overlap pct %v, want 57.5", r.Overlap.Pct)
			}
			if len(r.Idle) != 2 {
				t.Fatalf("idle lanes %+v", r.Idle)
			}
			for _, l := range r.Idle {
				switch l.Lane {
				case "stream 7":
					eq(t, "stream 7 host wait", l.HostWaitNS, int64(690*us))
					eq(t, "stream 7 kernel wait", l.KernelWaitNS, int64(40*us))
					eq(t, "stream 7 other", l.OtherNS, int64(0))
				case "stream 20":
					eq(t, "stream 20 host wait", l.HostWaitNS, int64(600*us))
				default:
					t.Errorf("lane %q", l.Lane)
				}
			}
			if r.Launch == nil {
				t.Fatal("no launch stats")
			}
			eq(t, "launch pairs", r.Launch.Pairs, 10)
			eq(t, "launch delay mean", r.Launch.DelayMeanNS, 55.2*us)
			eq(t, "launch delay max", r.Launch.DelayMaxNS, int64(221*us))
			eq(t, "launch delay outliers", r.Launch.LaunchDelayOutliers, 2)
			eq(t, "cpu mean", r.Launch.CPUMeanNS, 5.6*us) // (5+5+3+10+5)/5
			// rank 1's allreduce starts 50 µs late: overlap 2·(|[300,300]|+180) = 360 of 700
			r1 := s.Ranks[1]
			eq(t, "rank 1 comm", r1.Temporal.CommNS, int64(700*us))
			eq(t, "rank 1 overlap", r1.Overlap.OverlapNS, int64(360*us))
			// cross-rank: rank 1 starts each allreduce 50 µs late, both end at 650
			c := s.Collectives
			if c == nil {
				t.Fatal("no collectives")
			}
			eq(t, "matched", c.Matched, 2)
			eq(t, "start skew", c.StartSkewMax, int64(50*us))
			eq(t, "end skew", c.EndSkewMax, int64(0))
			if v != "kineto-2022" {
				// 2024-style NCCL kernels carry PG and seq; 2022 ones do not
				eq(t, "matched by", c.MatchedBy, "seq")
			} else {
				eq(t, "matched by", c.MatchedBy, "order")
			}
			// 264970 float32 = 1059880 bytes (from the kernel's args, or in
			// 2022 from its record_param_comms by External id) in 350 µs (the
			// last starter's duration): 3.0282 GB/s; busbw = algbw·2(n−1)/n = algbw for n = 2
			eq(t, "bytes", c.Ops[0].Bytes, int64(1059880))
			eq(t, "algbw", c.Ops[0].AlgBWGBps, 3.0282)
			eq(t, "busbw", c.Ops[0].BusBWGBps, 3.0282)
			eq(t, "op time", c.Ops[0].TimeNS, 350.0*us)
			if len(s.Stragglers) != 2 || s.Stragglers[0].Rank != 1 {
				t.Fatalf("stragglers %+v", s.Stragglers)
			}
			eq(t, "straggler wait caused", s.Stragglers[0].WaitCausedNS, 50.0*us)
			eq(t, "straggler last starts", s.Stragglers[0].LastStarts, 2)
		})
	}
}

// TestMemory: +4 MiB at 10 µs, +1 MiB at 20, −4 MiB at 850 (reserved 8 MiB):
// peak 5 MiB at 20 µs, fragmentation (8−5)/8 = 0.375.
func TestMemory(t *testing.T) {
	s := Summarize(load(t, "synth/kineto-2024"), DefaultOptions)
	m := s.Ranks[0].Memory
	if len(m) != 1 {
		t.Fatalf("memory %+v", m)
	}
	eq(t, "peak", m[0].PeakBytes, int64(5<<20))
	eq(t, "peak ts", m[0].PeakTS, int64(1700000000000020000))
	eq(t, "frag", m[0].FragAtPeak, 0.375)
	eq(t, "allocs", m[0].Allocs, 2)
	eq(t, "frees", m[0].Frees, 1)
	eq(t, "step 0 peak", m[0].StepPeaks[0], int64(5<<20))
	eq(t, "points", len(m[0].Points), 3)
	eq(t, "last point", m[0].Points[2].Allocated, int64(1<<20))
}

// TestHorovod: rank 1 reports every tensor 100 µs after rank 0.
func TestHorovod(t *testing.T) {
	for _, d := range []string{"synth/horovod", "synth/horovod-legacy"} {
		ranks := load(t, d)
		if len(ranks) != 1 || ranks[0].Format != trace.Horovod {
			t.Fatalf("%s: %d ranks, format %v", d, len(ranks), ranks[0].Format)
		}
		eq(t, d+" unterminated", ranks[0].Unterminated, d == "synth/horovod-legacy")
		s := Summarize(ranks, DefaultOptions)
		n := s.Negotiation
		if n == nil || n.Rounds != 4 || n.Ranks[0].Rank != 1 || n.Ranks[0].Last != 4 || n.Ranks[0].LateMeanNS != 100*us {
			t.Fatalf("%s: negotiation %+v", d, n)
		}
		// NCCL_ALLREDUCE: 300 + 40 µs per cycle
		eq(t, d+" comm", s.Ranks[0].Temporal.CommNS, int64(2*(300+40)*us))
	}
}

// TestBytePS: two gradients, two steps; the "total" spans are the
// collectives (3000 and 800 µs), partition stages are not.
func TestBytePS(t *testing.T) {
	ranks := load(t, "synth/byteps")
	if len(ranks) != 1 || ranks[0].Format != trace.BytePS {
		t.Fatalf("%d ranks, format %v", len(ranks), ranks[0].Format)
	}
	eq(t, "collectives", len(ranks[0].Collectives()), 4)
	eq(t, "ready events", len(ranks[0].Ready), 4)
	s := Summarize(ranks, DefaultOptions)
	// comm union per step: gradient 0 [0,3000] ∪ gradient 1 [1000,1800] = 3000
	eq(t, "comm", s.Ranks[0].Temporal.CommNS, int64(2*3000*us))
}

// TestRealGloo reads the traces record_ddp.py recorded with Debian's torch
// (4 ranks, rank 2 sleeping 40 ms into every step): rank 2 must rank first.
func TestRealGloo(t *testing.T) {
	ranks := load(t, "ddp-gloo-4")
	if len(ranks) != 4 {
		t.Fatalf("%d ranks", len(ranks))
	}
	for _, r := range ranks {
		eq(t, "format", r.Format, trace.Legacy)
		eq(t, "clock", r.Clock, "relative")
		eq(t, "steps", len(r.Steps), 3)
		if r.Meta == nil || len(r.Meta.Buckets) != 2 {
			t.Fatalf("rank %d: sidecar %+v", r.Rank, r.Meta)
		}
	}
	s := Summarize(ranks, DefaultOptions)
	c := s.Collectives
	if c == nil || c.Matched != 6 || c.Unmatched != 0 {
		t.Fatalf("collectives %+v", c)
	}
	eq(t, "bucket 0 bytes", c.Ops[0].Bytes, int64(2108456))
	eq(t, "bucket 1 bytes", c.Ops[1].Bytes, int64(20352))
	eq(t, "straggler", s.Stragglers[0].Rank, int64(2))
	for _, r := range s.Ranks {
		eq(t, "device", r.Device, "cpu")
		if r.Temporal.CommNS <= 0 || r.Temporal.ComputeNS <= 0 {
			t.Errorf("rank %d: temporal %+v", r.Rank, r.Temporal)
		}
	}
}

// Issue 24 items 5 and 7: launches through a vendor runtime (MTIA's
// category) pair with their kernels like CUDA's, and a kernel that starts
// before its launch call ends (clock skew) counts as a delay of 0 and is
// counted, never averaged in as negative.
func TestVendorRuntimeAndNegativeDelay(t *testing.T) {
	dir := t.TempDir()
	trace := `{"distributedInfo": {"rank": 0}, "traceEvents": [
 {"ph": "X", "cat": "mtia_runtime", "name": "mtiaLaunchKernel", "pid": 1, "tid": 1, "ts": 100, "dur": 10, "args": {"correlation": 1}},
 {"ph": "X", "cat": "kernel", "name": "k1", "pid": 0, "tid": 7, "ts": 130, "dur": 50, "args": {"correlation": 1, "stream": 7, "device": 0}},
 {"ph": "X", "cat": "mtia_runtime", "name": "mtiaLaunchKernel", "pid": 1, "tid": 1, "ts": 200, "dur": 10, "args": {"correlation": 2}},
 {"ph": "X", "cat": "kernel", "name": "k2", "pid": 0, "tid": 7, "ts": 205, "dur": 50, "args": {"correlation": 2, "stream": 7, "device": 0}}
]}`
	if err := os.WriteFile(filepath.Join(dir, "rank0.json"), []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := classify.New(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	ranks, err := Load([]string{filepath.Join(dir, "rank0.json")}, LoadOptions{Classifier: c, Rank: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize(ranks, DefaultOptions)
	l := s.Ranks[0].Launch
	if l == nil {
		t.Fatal("no launch pairs: the mtia_runtime calls were not taken for launches")
	}
	eq(t, "pairs", l.Pairs, 2)
	eq(t, "negative delays", l.NegativeDelays, 1)
	eq(t, "delay mean", l.DelayMeanNS, 10.0*us) // (20 + 0) / 2: the −5 µs is clipped
	eq(t, "delay max", l.DelayMaxNS, int64(20*us))
}
