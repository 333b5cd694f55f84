package scheme

import (
	"math/bits"
	"sync"

	"trainwire.dev/lib/tensor"
)

// bodies keeps the push messages' buffers a finished step no longer needs
// for the next steps' pushes: fresh ones cost their zeroing and, for
// memory the runtime gave back to the kernel, a page fault per 4 KiB on
// the first write. Contents are unspecified; encode writes every byte.
type bodies struct {
	mu   sync.Mutex
	free [][]byte
}

// maxFreeBodies bounds the idle buffers kept (two steps of a world of 8
// in flight: the sync loop prepares the next tensor while one syncs).
const maxFreeBodies = 16

// get returns a buffer of n bytes: the smallest idle one that holds n,
// else a fresh one with room to grow.
func (b *bodies) get(n int) []byte {
	b.mu.Lock()
	best := -1
	for i, x := range b.free {
		if cap(x) >= n && (best < 0 || cap(x) < cap(b.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		x := b.free[best]
		last := len(b.free) - 1
		b.free[best], b.free[last] = b.free[last], nil
		b.free = b.free[:last]
		b.mu.Unlock()
		return x[:n]
	}
	b.mu.Unlock()
	return make([]byte, n, n+n/8)
}

// put hands back x, which nothing reads or writes any more.
func (b *bodies) put(x []byte) {
	if cap(x) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.free) < maxFreeBodies {
		b.free = append(b.free, x[:0])
	}
}

// sizeClass rounds n up to one of eight sizes per power of two (at most
// 12.5 % more), so that results whose row counts differ a little from
// step to step share pooled buffers.
func sizeClass(n int) int {
	if n <= 16 {
		return n
	}
	shift := bits.Len(uint(n)) - 4
	return (n + 1<<shift - 1) >> shift << shift
}

// getResult returns n floats for a result's values, from the pool.
func getResult(p *tensor.Pool, n int) []float32 {
	if n == 0 {
		return nil
	}
	return p.Get(sizeClass(n))[:n]
}
