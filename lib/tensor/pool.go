package tensor

import (
	"sync"
	"weak"
)

// Pool recycles float32 buffers of the lengths a loop allocates again and
// again (one step's results, say): a buffer handed back with Put is handed
// out again by Get for the same length, without the zeroing (and, for
// memory the runtime returned to the kernel, the page faults) of a fresh
// allocation. Get's buffers hold whatever they last held: the caller
// overwrites every element (or clears it).
//
// A Pool only takes back what it lent: Put of a buffer Get did not hand
// out, or handed out and already took back, does nothing, so a caller may
// put every result of a computation without knowing which ones aliased
// other memory. It keeps at most Max bytes of buffers (0: 1 GiB); beyond
// that a put buffer is left to the garbage collector. The zero Pool is
// ready to use and safe for concurrent use.
type Pool struct {
	// Max bounds the bytes of idle buffers kept.
	Max int64

	mu   sync.Mutex
	idle map[int][][]float32
	// lent holds the buffers out on loan, weakly: a buffer the caller
	// drops instead of putting back is collected, and its entry swept.
	lent  map[weak.Pointer[float32]]struct{}
	swept int // len(lent) after the last sweep
	size  int64
}

// Get returns a buffer of n elements with unspecified contents: an idle
// one of that length, or a fresh Alloc.
func (p *Pool) Get(n int) []float32 {
	if n == 0 {
		return []float32{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var x []float32
	if free := p.idle[n]; len(free) > 0 {
		x = free[len(free)-1]
		p.idle[n] = free[:len(free)-1]
		p.size -= 4 * int64(n)
	} else {
		x = Alloc(n)
	}
	if p.lent == nil {
		p.lent = map[weak.Pointer[float32]]struct{}{}
	}
	if len(p.lent) > 2*p.swept+64 {
		p.sweep()
	}
	p.lent[weak.Make(&x[0])] = struct{}{}
	return x
}

// sweep forgets the loans whose buffers were collected. p.mu is held.
func (p *Pool) sweep() {
	for w := range p.lent {
		if w.Value() == nil {
			delete(p.lent, w)
		}
	}
	p.swept = len(p.lent)
}

// Put hands x back for a later Get of its length, if the pool lent it.
// The caller must not use x afterwards.
func (p *Pool) Put(x []float32) {
	if len(x) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w := weak.Make(&x[0])
	if _, ok := p.lent[w]; !ok {
		return
	}
	delete(p.lent, w)
	max := p.Max
	if max <= 0 {
		max = 1 << 30
	}
	if p.size+4*int64(len(x)) > max {
		return
	}
	if p.idle == nil {
		p.idle = map[int][][]float32{}
	}
	p.idle[len(x)] = append(p.idle[len(x)], x[:len(x):len(x)])
	p.size += 4 * int64(len(x))
}
