package collective

import (
	"context"
	"fmt"

	"trainwire.dev/lib/tensor"
)

// offsets returns the prefix sums of counts (len(counts)+1 entries).
func offsets(counts []int) ([]int, error) {
	off := make([]int, len(counts)+1)
	for i, c := range counts {
		if c < 0 {
			return nil, fmt.Errorf("negative count %d for rank %d", c, i)
		}
		off[i+1] = off[i] + c
	}
	return off, nil
}

// AllGatherVBytes gathers every rank's in into out on every rank: rank
// k's bytes land at out[sum(counts[:k]) : sum(counts[:k+1])]. counts (in
// bytes, one per rank, the same on every rank) must have counts[rank] ==
// len(in) and sum to len(out). in may alias its slot of out. It is the
// allgather half of the ring, pipelined: each rank sends every block but
// its successor's, (n−1) blocks.
func (c *Comm) AllGatherVBytes(ctx context.Context, in []byte, counts []int, out []byte) error {
	const name = "allgather"
	n, r := c.m.World(), c.m.Rank()
	if len(counts) != n {
		return fmt.Errorf("collective: %s: %d counts for a world of %d", name, len(counts), n)
	}
	off, err := offsets(counts)
	if err != nil {
		return fmt.Errorf("collective: %s: %w", name, err)
	}
	if counts[r] != len(in) || off[n] != len(out) {
		return fmt.Errorf("collective: %s: rank %d has %d bytes for a count of %d, output %d bytes for a total of %d", name, r, len(in), counts[r], len(out), off[n])
	}
	copy(out[off[r]:off[r+1]], in)
	if n == 1 {
		return ctx.Err()
	}
	stop, err := c.guard(ctx, name)
	if err != nil {
		return err
	}
	defer stop()
	tag := c.tag(opAllGather)
	next, prev := mod(r+1, n), mod(r-1, n)
	segB := 4 * c.seg
	nseg := func(k int) int { return (counts[k] + segB - 1) / segB }
	seg := func(k, j int) []byte {
		a := off[k] + j*segB
		return out[a:min(a+segB, off[k+1])]
	}
	send := func(t, k, j int) error { return c.ag.Send(next, tag, seg(k, j)) }
	recv := func(t, k, j int) error { return c.ag.Recv(prev, tag, seg(k, j)) }
	return wrap(name, c.ring(n-1, 2*n-2, nseg, send, recv))
}

// AllGatherV gathers every rank's in into out on every rank: rank k's
// elements land at out[sum(counts[:k]) : sum(counts[:k+1])]. counts (in
// elements, the same on every rank) must have counts[rank] == len(in) and
// sum to len(out). in may alias its slot of out.
func (c *Comm) AllGatherV(ctx context.Context, in []float32, counts []int, out []float32) error {
	bc := make([]int, len(counts))
	for i, v := range counts {
		bc[i] = 4 * v
	}
	if tensor.ZeroCopy {
		return c.AllGatherVBytes(ctx, tensor.Bytes(in), bc, tensor.Bytes(out))
	}
	ob := make([]byte, 4*len(out))
	if err := c.AllGatherVBytes(ctx, tensor.Bytes(in), bc, ob); err != nil {
		return err
	}
	tensor.DecodeLE(out, ob)
	return nil
}

// AllGather gathers equal-sized blocks: rank k's in lands at
// out[k·len(in) : (k+1)·len(in)] on every rank; len(out) must be
// world·len(in) and every rank must pass the same len(in).
func (c *Comm) AllGather(ctx context.Context, in, out []float32) error {
	counts := make([]int, c.m.World())
	for i := range counts {
		counts[i] = len(in)
	}
	return c.AllGatherV(ctx, in, counts, out)
}

// BroadcastBytes copies root's data into data on every other rank (all
// ranks pass the same length). It is a pipelined chain root → root+1 → …
// → root−1: each rank forwards every segment as soon as it has it, so
// every rank but the last sends len(data) bytes once.
func (c *Comm) BroadcastBytes(ctx context.Context, data []byte, root int) error {
	const name = "broadcast"
	n, r := c.m.World(), c.m.Rank()
	if root < 0 || root >= n {
		return fmt.Errorf("collective: %s: root %d out of range for a world of %d", name, root, n)
	}
	if n == 1 {
		return ctx.Err()
	}
	stop, err := c.guard(ctx, name)
	if err != nil {
		return err
	}
	defer stop()
	tag := c.tag(opBroadcast)
	pos := mod(r-root, n) // place in the chain
	next, prev := mod(r+1, n), mod(r-1, n)
	segB := 4 * c.seg
	nseg := (len(data) + segB - 1) / segB
	if len(data) == 0 {
		nseg = 1 // one empty message keeps the chain in step
	}
	seg := func(j int) []byte {
		a := j * segB
		return data[a:min(a+segB, len(data))]
	}
	if pos == 0 {
		for j := range nseg {
			if err := c.bc.Send(next, tag, seg(j)); err != nil {
				return wrap(name, err)
			}
		}
		return nil
	}
	if pos == n-1 {
		for j := range nseg {
			if err := c.bc.Recv(prev, tag, seg(j)); err != nil {
				return wrap(name, err)
			}
		}
		return nil
	}
	ready := make(chan int, nseg)
	quit := make(chan struct{})
	serr := make(chan error, 1)
	go func() {
		for {
			select {
			case j, ok := <-ready:
				if !ok {
					serr <- nil
					return
				}
				if err := c.bc.Send(next, tag, seg(j)); err != nil {
					serr <- err
					return
				}
			case <-quit:
				serr <- nil
				return
			}
		}
	}()
	for j := range nseg {
		if err := c.bc.Recv(prev, tag, seg(j)); err != nil {
			close(quit)
			<-serr
			return wrap(name, err)
		}
		ready <- j
	}
	close(ready)
	return wrap(name, <-serr)
}

// Broadcast copies root's data into data on every other rank; all ranks
// pass the same length.
func (c *Comm) Broadcast(ctx context.Context, data []float32, root int) error {
	if tensor.ZeroCopy {
		return c.BroadcastBytes(ctx, tensor.Bytes(data), root)
	}
	b := tensor.Bytes(data) // a copy on this build
	if err := c.BroadcastBytes(ctx, b, root); err != nil {
		return err
	}
	tensor.DecodeLE(data, b)
	return nil
}

// AllToAllVBytes sends send[sum(sendCounts[:k]) : …+sendCounts[k]] to
// rank k and receives rank k's block for this rank into
// recv[sum(recvCounts[:k]) : …+recvCounts[k]], for every k (this rank's
// own block is copied). Counts are in bytes; recvCounts[k] on this rank
// must equal sendCounts[this rank] on rank k. It runs n−1 rounds; in
// round s each rank sends to rank+s and receives from rank−s at the same
// time.
func (c *Comm) AllToAllVBytes(ctx context.Context, send []byte, sendCounts []int, recv []byte, recvCounts []int) error {
	const name = "alltoall"
	n, r := c.m.World(), c.m.Rank()
	so, ro, err := a2aLocal(name, r, n, send, sendCounts, recv, recvCounts)
	if err != nil {
		return err
	}
	if n == 1 {
		return ctx.Err()
	}
	stop, err := c.guard(ctx, name)
	if err != nil {
		return err
	}
	defer stop()
	tag := c.tag(opAllToAll)
	for s := 1; s < n; s++ {
		to, from := mod(r+s, n), mod(r-s, n)
		if err := c.a2a.Exchange(tag, to, send[so[to]:so[to+1]], from, recv[ro[from]:ro[from+1]]); err != nil {
			return wrap(name, err)
		}
	}
	return nil
}

// AllToAllV is AllToAllVBytes on float32 elements (counts in elements).
func (c *Comm) AllToAllV(ctx context.Context, send []float32, sendCounts []int, recv []float32, recvCounts []int) error {
	sc, rc := make([]int, len(sendCounts)), make([]int, len(recvCounts))
	for i, v := range sendCounts {
		sc[i] = 4 * v
	}
	for i, v := range recvCounts {
		rc[i] = 4 * v
	}
	if tensor.ZeroCopy {
		return c.AllToAllVBytes(ctx, tensor.Bytes(send), sc, tensor.Bytes(recv), rc)
	}
	rb := make([]byte, 4*len(recv))
	if err := c.AllToAllVBytes(ctx, tensor.Bytes(send), sc, rb, rc); err != nil {
		return err
	}
	tensor.DecodeLE(recv, rb)
	return nil
}

// Barrier returns on each rank once every rank has entered it: a
// dissemination barrier, ⌈log2 n⌉ rounds of empty messages, round i to
// rank+2^i and from rank−2^i.
func (c *Comm) Barrier(ctx context.Context) error {
	const name = "barrier"
	n, r := c.m.World(), c.m.Rank()
	if n == 1 {
		return ctx.Err()
	}
	stop, err := c.guard(ctx, name)
	if err != nil {
		return err
	}
	defer stop()
	tag := c.tag(opBarrier)
	for d := 1; d < n; d <<= 1 {
		if err := c.bar.Exchange(tag, mod(r+d, n), nil, mod(r-d, n), nil); err != nil {
			return wrap(name, err)
		}
	}
	return nil
}
