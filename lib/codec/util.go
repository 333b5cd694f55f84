package codec

import (
	"math"
	"math/bits"
	"slices"
	"sync/atomic"

	"runtime"
	"sync"
	"trainwire.dev/lib/tensor"
)

// u32bytes encodes uint32s little-endian into a fresh, never nil slice.
func u32bytes(x []uint32) []byte {
	return tensor.AppendUint32s(make([]byte, 0, 4*len(x)), x)
}

// workers returns how many goroutines to split n elements over: at most w
// (0 = GOMAXPROCS), and none smaller than 64Ki elements.
func workers(w, n int) int {
	return max(1, min(workersFor(w), n/(64<<10)))
}

// workersFor returns w, or GOMAXPROCS when w ≤ 0.
func workersFor(w int) int {
	if w <= 0 {
		return runtime.GOMAXPROCS(0)
	}
	return w
}

// chunks splits [0, n) into w nearly equal ranges whose bounds are
// multiples of align (except the last end).
func chunks(n, w, align int) [][2]int {
	out := make([][2]int, 0, w)
	per := (n/w + align - 1) / align * align
	for s := 0; s < n; s += per {
		out = append(out, [2]int{s, min(s+per, n)})
		if per == 0 {
			break
		}
	}
	if len(out) == 0 {
		out = append(out, [2]int{0, n})
	}
	return out
}

// parallelUnits runs f(u) for every u in [0, n) on at most w goroutines
// that take the units in turn from a shared counter, so that one that
// starts late (its core busy with something else) still leaves the
// others a fair share. f must not depend on which goroutine runs it.
func parallelUnits(n, w int, f func(u int)) {
	w = min(w, n)
	if w <= 1 {
		for u := range n {
			f(u)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range w {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				u := int(next.Add(1)) - 1
				if u >= n {
					return
				}
				f(u)
			}
		}()
	}
	wg.Wait()
}

// parallel runs f on every chunk, concurrently when there are several.
func parallel(cs [][2]int, f func(c int, lo, hi int)) {
	if len(cs) == 1 {
		f(0, cs[0][0], cs[0][1])
		return
	}
	var wg sync.WaitGroup
	for c, r := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(c, r[0], r[1])
		}()
	}
	wg.Wait()
}

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

func sortU32(x []uint32)      { slices.Sort(x) }
func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// atomicMax raises *p to v.
func atomicMax(p *uint32, v uint32) {
	for {
		o := atomic.LoadUint32(p)
		if v <= o || atomic.CompareAndSwapUint32(p, o, v) {
			return
		}
	}
}

// allocBytes returns n zeroed bytes; large buffers come from tensor.Alloc,
// which asks for transparent huge pages, so the first touch of an output
// costs one fault per 2 MiB rather than per 4 KiB.
func allocBytes(n int) []byte {
	if n < 4<<20 {
		return make([]byte, n)
	}
	return tensor.Bytes(tensor.Alloc((n + 3) / 4))[:n:n]
}
