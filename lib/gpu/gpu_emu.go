//go:build cudaemu && !cuda

package gpu

import "fmt"

// Built reports whether this binary was built with CUDA support
// (-tags cuda). A cudaemu build is not: its device runs the CUDA C on
// the CPU.
const Built = false

// Open returns the emulated device of a -tags cudaemu build (ordinal 0
// only): the kernels' CUDA C compiled by g++ and run on the CPU, one fiber
// per CUDA thread, behind the same host code as a GPU. It exists so that
// tools can be tested end to end through their --device gpu paths on a
// machine without a GPU (bin/hashsync-cudaemu); it is far too slow for
// anything else.
func Open(ordinal int) (*Device, error) {
	if ordinal != 0 {
		return nil, fmt.Errorf("gpu: device %d does not exist (a cudaemu build has device 0 only)", ordinal)
	}
	return newDevice(newCudaEmu()), nil
}
