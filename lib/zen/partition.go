package zen

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Parts is a partition of a worker's index set I_i into n disjoint parts:
// part j is Pos[Off[j]:Off[j+1]], positions into the partitioned index
// slice (so the caller gathers indices and values with one lookup each).
type Parts struct {
	Off []int
	Pos []int32
	// Serial counts the indices that went to serial memory after k failed
	// hashes, Overflow those that found serial memory full too and went to
	// the overflow list (hierarchical hashing only).
	Serial, Overflow int
}

// N is the number of parts.
func (p *Parts) N() int { return len(p.Off) - 1 }

// Part returns the positions of part j.
func (p *Parts) Part(j int) []int32 { return p.Pos[p.Off[j]:p.Off[j+1]] }

// HashConfig parameterises Algorithm 1.
type HashConfig struct {
	// N is the number of partitions (servers).
	N int
	// Seeds: Seeds[0] for h0, Seeds[1..k] for h1..hk (k = len−1 ≥ 1).
	Seeds Seeds
	// C sets the parallel memory: r1 = ceil(C·|I|/N) slots per partition
	// (C = 2: 2|G|d_G in total, the paper's default).
	C float64
	// R2 is the serial memory as a fraction of r1 (paper: 0.1); r2 =
	// ceil(R2·r1).
	R2 float64
	// Workers is the number of goroutines (0: GOMAXPROCS).
	Workers int
}

// Sizes returns r1 and r2 for m indices.
func (c HashConfig) Sizes(m int) (r1, r2 int) {
	r1 = max(1, int(ceilDiv(c.C*float64(m), float64(c.N))))
	r2 = max(1, int(ceilDiv(c.R2*float64(r1), 1)))
	return r1, r2
}

func ceilDiv(a, b float64) float64 {
	q := a / b
	if f := float64(int64(q)); f < q {
		return f + 1
	}
	return q
}

// Check reports a configuration Hash cannot run.
func (c HashConfig) Check() error {
	switch {
	case c.N < 1:
		return fmt.Errorf("zen: %d partitions", c.N)
	case len(c.Seeds) < 2:
		return fmt.Errorf("zen: need h0 and at least one second-level hash, got %d seeds", len(c.Seeds))
	case !(c.C > 0) || !(c.R2 > 0):
		return fmt.Errorf("zen: memory factors must be positive (c=%g, r2=%g)", c.C, c.R2)
	}
	return nil
}

// workers is the number of goroutines for m items: w when set (tests force
// concurrency on small inputs), else GOMAXPROCS, but no fewer than a few
// thousand items per goroutine, below which the fork costs more than it
// saves.
func workers(w, m int) int {
	if w > 0 {
		return max(1, min(w, m))
	}
	return max(1, min(runtime.GOMAXPROCS(0), m/4096))
}

// Hasher runs Algorithm 1, reusing its memory across calls. It is not safe
// for concurrent use (one Hasher runs its own goroutines).
type Hasher struct {
	x     []uint32
	c     []int32
	parts Parts
}

// Hash partitions idx (unique indices) by h0 through hierarchical hashing:
// each index tries k second-level slots of its partition's parallel memory
// with compare-and-swap, then takes the next serial slot with an atomic
// counter, and when serial memory is full goes to a lock-protected
// overflow list — so no index is ever lost or written out of bounds,
// whatever the sizes. Slots hold position+1 (0 is empty). Within a part
// the order is the memory's, which depends on the races; the sets do not.
// The returned Parts is reused by the next call.
func (h *Hasher) Hash(idx []uint32, cfg HashConfig) (*Parts, error) {
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	m, n, k := len(idx), cfg.N, len(cfg.Seeds)-1
	r1, r2 := cfg.Sizes(m)
	stride := r1 + r2
	need := n * stride
	if cap(h.x) < need {
		h.x = make([]uint32, need)
	} else {
		h.x = h.x[:need]
		clear(h.x)
	}
	if cap(h.c) < n {
		h.c = make([]int32, n)
	} else {
		h.c = h.c[:n]
		clear(h.c)
	}
	x, c := h.x, h.c
	seeds := cfg.Seeds
	var ovMu sync.Mutex
	var overflow [][2]int32 // (partition, position)
	insert := func(lo, hi int) {
		var local [][2]int32
		for pos := lo; pos < hi; pos++ {
			v := idx[pos]
			p := int(Reduce(MM3(v, seeds[0]), uint32(n)))
			base := p * stride
			tag := uint32(pos) + 1
			done := false
			for i := 1; i <= k; i++ {
				q := int(Reduce(MM3(v, seeds[i]), uint32(r1)))
				if atomic.CompareAndSwapUint32(&x[base+q], 0, tag) {
					done = true
					break
				}
			}
			if done {
				continue
			}
			s := int(atomic.AddInt32(&c[p], 1)) - 1
			if s < r2 {
				atomic.StoreUint32(&x[base+r1+s], tag)
				continue
			}
			local = append(local, [2]int32{int32(p), int32(pos)})
		}
		if len(local) > 0 {
			ovMu.Lock()
			overflow = append(overflow, local...)
			ovMu.Unlock()
		}
	}
	nw := workers(cfg.Workers, m)
	forChunks(m, nw, insert)

	// Extraction: scan each partition's r1+r2 slots (the paper's
	// nonzero()), then append its overflow entries.
	ovCount := make([]int, n)
	for _, o := range overflow {
		ovCount[o[0]]++
	}
	p := &h.parts
	if cap(p.Off) < n+1 {
		p.Off = make([]int, n+1)
	}
	p.Off = p.Off[:n+1]
	if cap(p.Pos) < m {
		p.Pos = make([]int32, m)
	}
	p.Pos = p.Pos[:m]
	// Count first (occupied slots per partition), so partitions can be
	// extracted in parallel into their final places.
	cnt := make([]int, n)
	forChunks(n, min(nw, n), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			z := 0
			for _, t := range x[j*stride : j*stride+r1] {
				if t != 0 {
					z++
				}
			}
			cnt[j] = z + min(int(c[j]), r2) + ovCount[j]
		}
	})
	p.Off[0] = 0
	for j := range n {
		p.Off[j+1] = p.Off[j] + cnt[j]
	}
	if p.Off[n] != m {
		return nil, fmt.Errorf("zen: internal error: hashed %d of %d indices", p.Off[n], m)
	}
	ovAt := make([]int, n)
	for j := range n {
		ovAt[j] = p.Off[j+1] - ovCount[j]
	}
	for _, o := range overflow {
		j := o[0]
		p.Pos[ovAt[j]] = o[1]
		ovAt[j]++
	}
	forChunks(n, min(nw, n), func(lo, hi int) {
		for j := lo; j < hi; j++ {
			w := p.Off[j]
			for _, t := range x[j*stride : j*stride+r1+min(int(c[j]), r2)] {
				if t != 0 {
					p.Pos[w] = int32(t - 1)
					w++
				}
			}
		}
	})
	p.Serial, p.Overflow = 0, len(overflow)
	for j := range n {
		p.Serial += int(c[j])
	}
	return p, nil
}

// forChunks runs fn on nw contiguous chunks of [0, m) concurrently.
func forChunks(m, nw int, fn func(lo, hi int)) {
	if nw <= 1 || m < 2 {
		fn(0, m)
		return
	}
	var wg sync.WaitGroup
	for w := range nw {
		lo, hi := m*w/nw, m*(w+1)/nw
		wg.Go(func() { fn(lo, hi) })
	}
	wg.Wait()
}

// Bucketer is the counting-sort partitioner: a histogram of h0 per
// goroutine, prefix sums, a stable scatter. Lossless and deterministic, no
// slack memory; it gives exactly the same sets per partition as Hash,
// each in ascending position order. Not safe for concurrent use.
type Bucketer struct {
	part  []int32
	parts Parts
}

// Bucket partitions idx into n parts by h0 with seed.
func (b *Bucketer) Bucket(idx []uint32, n int, seed uint32, nworkers int) *Parts {
	m := len(idx)
	if cap(b.part) < m {
		b.part = make([]int32, m)
	}
	part := b.part[:m]
	nw := workers(nworkers, m)
	hist := make([][]int, nw)
	forChunksIdx(m, nw, func(w, lo, hi int) {
		h := make([]int, n)
		for pos := lo; pos < hi; pos++ {
			j := int32(Reduce(MM3(idx[pos], seed), uint32(n)))
			part[pos] = j
			h[j]++
		}
		hist[w] = h
	})
	p := &b.parts
	if cap(p.Off) < n+1 {
		p.Off = make([]int, n+1)
	}
	p.Off = p.Off[:n+1]
	if cap(p.Pos) < m {
		p.Pos = make([]int32, m)
	}
	p.Pos = p.Pos[:m]
	// start[w][j]: where goroutine w writes its first index of part j.
	start := make([][]int, nw)
	at := 0
	for j := range n {
		p.Off[j] = at
		for w := range nw {
			if start[w] == nil {
				start[w] = make([]int, n)
			}
			start[w][j] = at
			at += hist[w][j]
		}
	}
	p.Off[n] = at
	forChunksIdx(m, nw, func(w, lo, hi int) {
		s := start[w]
		for pos := lo; pos < hi; pos++ {
			j := part[pos]
			p.Pos[s[j]] = int32(pos)
			s[j]++
		}
	})
	p.Serial, p.Overflow = 0, 0
	return p
}

func forChunksIdx(m, nw int, fn func(w, lo, hi int)) {
	if nw <= 1 {
		fn(0, 0, m)
		return
	}
	var wg sync.WaitGroup
	for w := range nw {
		lo, hi := m*w/nw, m*(w+1)/nw
		wg.Go(func() { fn(w, lo, hi) })
	}
	wg.Wait()
}
