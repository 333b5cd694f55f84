//go:build cuda || cudaemu

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/gpu"
)

// TestDeviceGPUParity (GPU machines, -tags cuda): --device gpu writes the
// same bytes as --device cpu for every GPU codec, with error feedback over
// two steps and the same state file. With -tags cudaemu (make
// test-cudaemu) the device is the kernels' CUDA C run on the CPU, one
// fiber per CUDA thread, so tensor a has 5000 elements instead of 70000
// (74 s instead of 6; lib/gpu's TestCUDAEmu covers reductions across 64Ki
// blocks).
func TestDeviceGPUParity(t *testing.T) {
	n := 70000
	if !gpu.Built {
		n = 5000
	}
	in := stream(t, dense("a", 0, gauss(n, 1)), dense("b", 0, gauss(1001, 2), 7, 143),
		dense("a", 1, gauss(n, 3)), dense("b", 1, gauss(1001, 4), 7, 143))
	dir := t.TempDir()
	for _, algo := range []string{"bf16", "efsignsgd", "fp16", "mstopk", "onebit", "qsgd", "signsgd", "terngrad", "topk"} {
		for _, mem := range []string{"none", "residual"} {
			args := []string{"encode", "--algo", algo, "--memory", mem, "--seed", "5", "--ratio", "0.02"}
			sc, sg := filepath.Join(dir, algo+mem+".cpu"), filepath.Join(dir, algo+mem+".gpu")
			cpu, errs, code := runIn(t, in, append(args, "--device", "cpu", "--state-out", sc)...)
			require.Equal(t, 0, code, errs)
			gpuOut, errs, code := runIn(t, in, append(args, "--device", "gpu", "--state-out", sg)...)
			require.Equal(t, 0, code, errs)
			require.Equal(t, cpu, gpuOut, "%s %s: frames differ", algo, mem)
			a, _ := os.ReadFile(sc)
			b, _ := os.ReadFile(sg)
			require.Equal(t, len(a), len(b), "%s %s: state files differ", algo, mem)
		}
	}
}
