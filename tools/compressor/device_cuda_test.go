//go:build cuda

package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDeviceGPUParity (GPU machines, -tags cuda): --device gpu writes the
// same bytes as --device cpu for every GPU codec, with error feedback over
// two steps and the same state file.
func TestDeviceGPUParity(t *testing.T) {
	in := stream(t, dense("a", 0, gauss(70000, 1)), dense("b", 0, gauss(1001, 2), 7, 143),
		dense("a", 1, gauss(70000, 3)), dense("b", 1, gauss(1001, 4), 7, 143))
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
