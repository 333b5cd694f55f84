//go:build cuda

package gpu

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
static void* tw_alloc_host(size_t n, int* err) {
	void* p = 0;
	*err = (int)cuMemAllocHost(&p, n);
	return p;
}
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// stageMax is the size of the page-locked staging buffer through which
// cuBackend copies up to that many bytes between the host and the device.
// Small copies to or from pageable Go memory cost more per byte on an H100
// host than staged ones (top-k at 64 Mi elements copies its 128 KiB of tile
// counts, 256 KiB of offsets and 2 × 268 KiB of values and indices: staging
// took ~0.15 ms off its 1.4 ms); a 4 MiB upload was slower staged (the
// extra host copy), so larger copies (whole tensors) stay direct.
const stageMax = 1 << 20

// staging returns the page-locked staging buffer (allocated on first use,
// with the context current; freed by close).
func (b *cuBackend) staging() ([]byte, error) {
	if b.stage == nil {
		var e C.int
		p := C.tw_alloc_host(C.size_t(stageMax), &e)
		if e != 0 || p == nil {
			return nil, fmt.Errorf("gpu: cuMemAllocHost(%d): CUDA error %d", stageMax, int(e))
		}
		b.stage = unsafe.Slice((*byte)(p), stageMax)
	}
	return b.stage, nil
}

func (b *cuBackend) freeStaging() {
	if b.stage != nil {
		_ = cu.MemFreeHost(unsafe.Pointer(&b.stage[0]))
		b.stage = nil
	}
}
