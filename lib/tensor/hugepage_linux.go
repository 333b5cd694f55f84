//go:build linux && !purego

package tensor

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// hugeMin is the size from which Alloc asks for transparent huge pages.
const hugeMin = 4 << 20

// adviseHuge asks the kernel to back the 2 MiB-aligned interior of b with
// transparent huge pages (madvise MADV_HUGEPAGE; only advice, errors are
// ignored). Large communication buffers are copied through by the kernel
// and by Add at memory speed, where 4 KiB pages cost TLB misses.
func adviseHuge(p unsafe.Pointer, n int) {
	if n < hugeMin {
		return
	}
	const huge = 2 << 20
	start := (uintptr(p) + huge - 1) &^ (huge - 1)
	end := (uintptr(p) + uintptr(n)) &^ (huge - 1)
	if end <= start {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}
