package espresso

import (
	"encoding/json"
	"os"
	"syscall"
	"testing"

	"trainwire.dev/lib/costmodel"
)

func bertInstance(t testing.TB) *Instance {
	b, _ := os.ReadFile("../../testdata/plan/bert-base.json")
	var j struct {
		Name      string
		ForwardNS float64 `json:"forward_ns"`
		Grads     []struct {
			Name      string
			Numel     int64
			ReadyNS   float64 `json:"ready_ns"`
			ComputeNS float64 `json:"compute_ns"`
		}
	}
	if err := json.Unmarshal(b, &j); err != nil {
		t.Fatal(err)
	}
	job := Job{Name: j.Name, ForwardNS: j.ForwardNS}
	for _, g := range j.Grads {
		job.Grads = append(job.Grads, Grad{Name: g.Name, Numel: g.Numel, ReadyNS: g.ReadyNS, ComputeNS: g.ComputeNS})
	}
	cl := costmodel.Cluster{Nodes: 8, GPUsPerNode: 8, Intra: costmodel.Link{AlphaNS: 10e3, GBps: 150}, Inter: costmodel.Link{AlphaNS: 30e3, GBps: 12.5},
		PCIe: costmodel.Link{AlphaNS: 10e3, GBps: 12.5}, CPUWorkers: 2}
	c := codecCosts(t, "topk")
	c.GPU = &costmodel.CodecTimes{Encode: costmodel.Linear{Alpha: 60e3, Beta: 1.0 / 150}, Decode: costmodel.Linear{Alpha: 25e3, Beta: 1.0 / 300}}
	in, err := NewInstance(job, cl, c, NewTree(0))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func BenchmarkPlanBERT(b *testing.B) {
	for _, cpu := range []bool{false, true} {
		b.Run(map[bool]string{false: "gpu-only", true: "gpu+cpu"}[cpu], func(b *testing.B) {
			in := bertInstance(b)
			c0 := cpuTime()
			for b.Loop() {
				in2, _ := NewInstance(in.Job, in.Cluster, in.Costs, in.Tree)
				if _, err := in2.Plan(Options{NoCPU: !cpu}); err != nil {
					b.Fatal(err)
				}
			}
			// the process's CPU time: on a shared machine the wall time
			// measures the neighbours too
			b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user and system time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
