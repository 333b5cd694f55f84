package tensor

import (
	"runtime"
	"testing"
)

// TestPool: a put buffer comes back for its length only; buffers the pool
// did not lend, or lent and took back, are not taken; Max bounds what is
// kept; dropped loans do not pile up.
func TestPool(t *testing.T) {
	var p Pool
	a := p.Get(1000)
	a[0] = 7
	p.Put(a)
	if b := p.Get(999); &b[0] == &a[0] {
		t.Fatal("a buffer of another length came back")
	}
	b := p.Get(1000)
	if &b[0] != &a[0] || b[0] != 7 {
		t.Fatal("the put buffer did not come back, as it was")
	}
	p.Put(b)
	p.Put(b) // already back: ignored
	if c, d := p.Get(1000), p.Get(1000); &c[0] == &d[0] {
		t.Fatal("a buffer put twice was lent twice")
	}
	foreign := Alloc(1000)
	p.Put(foreign)
	if e := p.Get(1000); &e[0] == &foreign[0] {
		t.Fatal("a buffer the pool never lent was lent")
	}
	q := Pool{Max: 4 * 1500}
	x, y := q.Get(1000), q.Get(1000)
	q.Put(x)
	q.Put(y) // over Max: dropped
	if z, w := q.Get(1000), q.Get(1000); &z[0] != &x[0] || &w[0] == &y[0] {
		t.Fatal("Max did not bound the idle buffers")
	}
	var r Pool
	for range 100 {
		r.Get(16) // never put back
	}
	runtime.GC()
	r.mu.Lock()
	r.sweep()
	n := len(r.lent)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d loans still tracked after the dropped buffers were collected", n)
	}
}
