package collective

import (
	"context"
	"fmt"
)

// AllReduceBytesMulti is AllReduceBytes on several buffers at once, in
// one ring: chunk k of the ring is chunk k of every buffer (each buffer
// chunked on its own, Chunk(len(buf)/elem, world, k)), concatenated in
// buffer order. Every element is therefore accumulated in the same ring
// order as AllReduceBytes on its buffer alone gives (RingOrder), and the
// results are the same bits; the bytes sent are the sum of the buffers'
// own, but the 2(n−1) hops are paid once for all of them instead of once
// per buffer. reduce must work element by element (a segment may span
// two buffers). The buffers are packed into one scratch array and the
// results copied back.
func (c *Comm) AllReduceBytesMulti(ctx context.Context, bufs [][]byte, elem int, reduce Reducer) error {
	n := c.m.World()
	if elem <= 0 {
		return fmt.Errorf("collective: allreduce: element size %d", elem)
	}
	for i, b := range bufs {
		if len(b)%elem != 0 {
			return fmt.Errorf("collective: allreduce: buffer %d: %d bytes are not elements of %d", i, len(b), elem)
		}
	}
	if n == 1 {
		return ctx.Err()
	}
	// start[k]: the first element of packed chunk k.
	start := make([]int, n+1)
	for k := range n {
		start[k+1] = start[k]
		for _, b := range bufs {
			lo, hi := Chunk(len(b)/elem, n, k)
			start[k+1] += hi - lo
		}
	}
	data := make([]byte, elem*start[n])
	pack(data, bufs, elem, n, false)
	bounds := func(k int) (int, int) { return start[k], start[k+1] }
	if err := c.reduceChunks(ctx, "allreduce", opAllReduce, data, elem, bounds, reduce, true); err != nil {
		return err
	}
	pack(data, bufs, elem, n, true)
	return nil
}

// pack copies chunk k of every buffer into data, chunk-major (back: the
// other way).
func pack(data []byte, bufs [][]byte, elem, n int, back bool) {
	off := 0
	for k := range n {
		for _, b := range bufs {
			lo, hi := Chunk(len(b)/elem, n, k)
			m := elem * (hi - lo)
			if back {
				copy(b[elem*lo:], data[off:off+m])
			} else {
				copy(data[off:], b[elem*lo:elem*hi])
			}
			off += m
		}
	}
}
