package classify

import (
	"fmt"
	"strings"
	"testing"
)

// TestDefaults covers every naming vintage that broke HTA's analyses.
func TestDefaults(t *testing.T) {
	c, err := New(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, cat string
		ph        byte
		want      Class
	}{
		{"ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "Kernel", 'X', Comm},
		{"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)", "kernel", 'X', Comm},
		{"ncclDevKernel_Generic", "kernel", 'X', Comm},
		{"rcclAllReduceKernel", "kernel", 'X', Comm},
		{"gloo:all_reduce", "", 'X', Comm},
		{"c10d::allreduce_", "cpu_op", 'X', Comm},
		{"record_param_comms", "cpu_op", 'X', Comm},
		{"NCCL_ALLREDUCE", "horovod", 'X', Comm},
		{"MPI_BCAST", "horovod", 'X', Comm},
		{"Comm.byteps.gradient_0.PUSH", "", 'X', Comm},
		{"Comm.byteps.gradient_0.COPYD2H", "", 'X', Memory},
		{"Memcpy HtoD (Pageable -> Device)", "gpu_memcpy", 'X', Memory},
		{"Memset (Device)", "gpu_memset", 'X', Memory},
		{"hipMemcpyAsync", "cuda_runtime", 'X', Runtime},
		{"cudaLaunchKernel", "cuda_runtime", 'X', Runtime},
		{"hipLaunchKernel", "", 'X', Runtime},
		{"mtiaLaunchKernel", "mtia_runtime", 'X', Runtime},
		{"urEnqueueKernelLaunch", "xpu_runtime", 'X', Runtime},
		{"launch", "privateuse1_runtime", 'X', Runtime},
		{"aclrtLaunchKernel", "privateuse1_driver", 'X', Runtime},
		{"hipModuleLaunchKernel", "hip_runtime", 'X', Runtime},
		{"cudaDeviceSynchronize", "cuda_runtime", 'X', Sync},
		{"Stream Sync", "cuda_sync", 'X', Sync},
		{"Event Sync", "", 'X', Sync},
		{"Stream Wait Event", "", 'X', Sync},
		{"ProfilerStep#12", "user_annotation", 'X', Annotation},
		{"nccl:all_reduce", "user_annotation", 'X', Annotation},
		{"nccl:all_reduce", "gpu_user_annotation", 'X', Annotation},
		{"## forward ##", "", 'X', Annotation},
		{"ALLREDUCE", "horovod", 'X', Annotation},
		{"NEGOTIATE_ALLREDUCE", "horovod", 'X', Other},
		{"volta_sgemm_128x64_nn", "kernel", 'X', Compute},
		{"Cijk_Ailk_Bljk_SB_MT64x64x16", "kernel", 'X', Compute}, // ROCm GEMM
		{"aten::addmm", "cpu_op", 'X', Compute},
		{"[memory]", "cpu_instant_event", 'i', Memory},
		{"whatever", "", 'i', Other},
	}
	for _, k := range cases {
		if got := c.Classify(k.name, k.cat, k.ph); got != k.want {
			t.Errorf("%q (%s): %v, want %v", k.name, k.cat, got, k.want)
		}
	}
}

func TestUserRules(t *testing.T) {
	r, err := ParseFlag("comm=cat:^my_comm$")
	if err != nil || r.Cat != "^my_comm$" || r.Class != "comm" {
		t.Fatalf("%+v %v", r, err)
	}
	c, err := New([]Rule{r, {Class: "compute", Name: "^ncclKernel"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if c.Classify("x", "my_comm", 'X') != Comm || c.Classify("ncclKernel_x", "kernel", 'X') != Compute {
		t.Error("user rules do not win")
	}
	rules, err := ReadRules(strings.NewReader(`[{"class":"sync","name":"^wait"}]`))
	if err != nil || len(rules) != 1 {
		t.Fatal(rules, err)
	}
	for _, bad := range [][]Rule{{{Class: "nope", Name: "x"}}, {{Class: "comm", Name: "("}}, {{Class: "comm"}}} {
		if _, err := New(bad, false); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if _, err := ReadRules(strings.NewReader(`[{"class":"sync","nmae":"x"}]`)); err == nil {
		t.Error("unknown field accepted")
	}
}

// TestPointerCache: the cache keyed by string pointers answers as the
// rules do, for interned and fresh strings alike, past its size.
func TestPointerCache(t *testing.T) {
	c, err := New(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ampere_sgemm_128x64_tn", "Memcpy DtoH", "cudaLaunchKernel", "aten::add_", ""}
	cats := []string{"kernel", "gpu_memcpy", "cuda_runtime", "cpu_op", ""}
	for round := 0; round < 2; round++ {
		for i := 0; i < 400; i++ {
			name := names[i%len(names)]
			if i%7 == 0 {
				name = fmt.Sprintf("%s%d", name, i) // fresh strings, many of them
			}
			cat := cats[i%len(cats)]
			fresh, _ := New(nil, false)
			for _, ph := range []byte{'X', 'i'} {
				if got, want := c.Classify(name, cat, ph), fresh.Classify(name, cat, ph); got != want {
					t.Fatalf("Classify(%q, %q, %c) = %v, want %v", name, cat, ph, got, want)
				}
			}
		}
	}
}
