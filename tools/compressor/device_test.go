package main

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/gpu"
)

// TestDeviceFlag: --device cpu is the default path; a malformed device is
// a usage error.
func TestDeviceFlag(t *testing.T) {
	in := stream(t, dense("w", 0, gauss(5000, 1)))
	def, _, code := runIn(t, in, "encode", "--algo", "topk")
	require.Equal(t, 0, code)
	cpu, _, code := runIn(t, in, "encode", "--algo", "topk", "--device", "cpu")
	require.Equal(t, 0, code)
	require.Equal(t, def, cpu)
	for _, bad := range []string{"tpu", "gpu:-1", "gpu:x"} {
		_, errs, code := runIn(t, in, "encode", "--algo", "topk", "--device", bad)
		require.Equal(t, cli.ExitUsage, code, bad)
		require.Contains(t, errs, "--device", bad)
	}
}

// TestDeviceGPUWithoutCUDA: in a binary built without -tags cuda,
// --device gpu says so and exits 80 without writing anything.
func TestDeviceGPUWithoutCUDA(t *testing.T) {
	if d, err := gpu.Open(0); !errors.Is(err, gpu.ErrNoCUDA) {
		if d != nil {
			d.Close()
		}
		t.Skip("built with -tags cuda or cudaemu")
	}
	in := stream(t, dense("w", 0, gauss(100, 1)))
	out, errs, code := runIn(t, in, "encode", "--algo", "topk", "--device", "gpu")
	require.Equal(t, cli.ExitUsage, code)
	require.Contains(t, errs, "without CUDA")
	require.Empty(t, out)
	t.Setenv("TRAINWIRE_COMPRESSOR_DEVICE", "gpu")
	_, _, code = runIn(t, in, "encode", "--algo", "topk")
	require.Equal(t, cli.ExitUsage, code, "TRAINWIRE_COMPRESSOR_DEVICE")
}
