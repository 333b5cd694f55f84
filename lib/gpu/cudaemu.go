//go:build cudaemu

package gpu

/*
#cgo CXXFLAGS: -std=c++17 -O1 -fno-strict-aliasing
#include <stdlib.h>
#include <string.h>
int tw_emu_launch(const char* name, int grid, int block, const unsigned long long* args);
*/
import "C"

import (
	"embed"
	"fmt"
	"math"
	"unsafe"
)

// cudaSources makes the CUDA C (which cudaemu.cpp #includes from
// kernels/) part of this package's build inputs, so editing a .cu
// recompiles cudaemu.cpp instead of reusing a cached object.
//
//go:embed kernels/*.cu kernels/*.cuh
var cudaSources embed.FS

// cudaEmu (build tag cudaemu, for tests only) is a backend that runs the CUDA C of kernels/*.cu itself,
// compiled by g++ with cudaemu.h (fibers for threads, real barriers for
// __syncthreads and the shuffles): `go test -tags cudaemu ./gpu/`. Where
// the Go emulator checks the algorithm, this checks the CUDA source.
type cudaEmu struct{ allocs map[dptr]cAlloc }

type cAlloc struct {
	p unsafe.Pointer
	n int64
}

func (c *cudaEmu) name() string { return "CUDA C on the CPU (cudaemu)" }

func (c *cudaEmu) alloc(n int64) (dptr, error) {
	p := C.calloc(C.size_t(n+8), 1)
	if p == nil {
		return 0, fmt.Errorf("calloc %d", n)
	}
	c.allocs[dptr(uintptr(p))] = cAlloc{p, n}
	return dptr(uintptr(p)), nil
}

func (c *cudaEmu) free(p dptr) {
	a := c.allocs[p]
	delete(c.allocs, p)
	C.free(a.p)
}

// mem returns n bytes at device address p (inside one allocation).
func (c *cudaEmu) mem(p dptr, n int) []byte {
	for base, a := range c.allocs {
		if p >= base && int64(p-base)+int64(n) <= a.n+8 {
			return unsafe.Slice((*byte)(unsafe.Add(a.p, int(p-base))), n)
		}
	}
	panic(fmt.Sprintf("cudaemu: %d bytes at %#x are not allocated", n, uint64(p)))
}

func (c *cudaEmu) htod(dst dptr, src []byte) error { copy(c.mem(dst, len(src)), src); return nil }
func (c *cudaEmu) dtoh(dst []byte, src dptr) error { copy(dst, c.mem(src, len(dst))); return nil }
func (c *cudaEmu) memset0(p dptr, n int64) error   { clear(c.mem(p, int(n))); return nil }
func (c *cudaEmu) dtod(dst, src dptr, n int64) error {
	copy(c.mem(dst, int(n)), c.mem(src, int(n)))
	return nil
}
func (c *cudaEmu) sync() error  { return nil }
func (c *cudaEmu) close() error { return nil }

func (c *cudaEmu) launch(name string, grid, block, shared int, args ...any) error {
	sig := cudaEmuSigs[name]
	if len(sig) != len(args) {
		return fmt.Errorf("cudaemu: kernel %s takes %d parameters, launched with %d", name, len(sig), len(args))
	}
	a := make([]C.ulonglong, len(args)+1)
	for i, v := range args {
		switch v := v.(type) {
		case dptr:
			a[i] = C.ulonglong(v)
		case uint64:
			a[i] = C.ulonglong(v)
		case float64:
			a[i] = C.ulonglong(math.Float64bits(v))
		}
	}
	cn := C.CString(name)
	defer C.free(unsafe.Pointer(cn))
	switch C.tw_emu_launch(cn, C.int(grid), C.int(block), &a[0]) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("cudaemu: no kernel %q", name)
	default:
		return fmt.Errorf("cudaemu: kernel %s deadlocked at a barrier", name)
	}
}

var cudaEmuSigs = kernelParams()

// newCudaEmu returns the cudaemu backend (test builds with -tags cudaemu).
func newCudaEmu() backend { return &cudaEmu{allocs: map[dptr]cAlloc{}} }
