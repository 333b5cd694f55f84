package collective

import (
	"context"
	"fmt"

	"trainwire.dev/lib/mesh"
)

// Reducer folds src into dst in place: dst = dst ⊕ src, element by
// element, where both hold len(dst)/elem encoded elements. The ring calls
// it as dst = own partial sum, src = the partial sum that arrived, so ⊕
// must be commutative for every rank to agree on what a chunk's sum means
// (its order along the ring is fixed; see AllReduceBytes).
type Reducer func(dst, src []byte)

// AllReduceBytes is AllReduce in an encoded domain: data holds L = len(data)
// /elem elements of elem bytes each (an f16 tensor: elem 2), and reduce
// adds two encoded blocks (decode, add, re-encode: the re-encode point of
// a summable compressed encoding). The ring is AllReduce's, with chunks
// and segments counted in elements: the sum of chunk k is accumulated
// along the ring starting at rank k+1: s = x_{k+1}, then s = x_j ⊕ s at
// ranks k+2, …, k (mod n), once per hop (so an encoding that rounds
// rounds at every hop); the allgather then copies chunk k's bytes
// everywhere. Every rank ends with bit-identical bytes. Payload bytes per
// rank: elem·(L − |chunk r|) in "reduce-scatter", elem·(L − |chunk r+1|)
// in "allgather".
func (c *Comm) AllReduceBytes(ctx context.Context, data []byte, elem int, reduce Reducer) error {
	return c.reduceBytes(ctx, "allreduce", opAllReduce, data, elem, reduce, true)
}

// ReduceScatterBytes is the first half of AllReduceBytes: rank r ends with
// the sum of chunk r (element bounds Chunk(len(data)/elem, world, r),
// returned) in those elements of data.
func (c *Comm) ReduceScatterBytes(ctx context.Context, data []byte, elem int, reduce Reducer) (lo, hi int, err error) {
	if elem <= 0 || len(data)%elem != 0 {
		return 0, 0, fmt.Errorf("collective: reduce-scatter: %d bytes are not elements of %d", len(data), elem)
	}
	lo, hi = Chunk(len(data)/elem, c.m.World(), c.m.Rank())
	return lo, hi, c.reduceBytes(ctx, "reduce-scatter", opReduceScatter, data, elem, reduce, false)
}

func (c *Comm) reduceBytes(ctx context.Context, name string, op uint32, data []byte, elem int, reduce Reducer, gather bool) error {
	if elem <= 0 || len(data)%elem != 0 {
		return fmt.Errorf("collective: %s: %d bytes are not elements of %d", name, len(data), elem)
	}
	L, n := len(data)/elem, c.m.World()
	return c.reduceChunks(ctx, name, op, data, elem, func(k int) (int, int) { return Chunk(L, n, k) }, reduce, gather)
}

// reduceChunks is the ring of reduceBytes over the chunks bounds gives
// (element bounds of chunk k, ascending and covering data).
func (c *Comm) reduceChunks(ctx context.Context, name string, op uint32, data []byte, elem int, bounds func(k int) (int, int), reduce Reducer, gather bool) error {
	n := c.m.World()
	if n == 1 {
		return ctx.Err()
	}
	stop, err := c.guard(ctx, name)
	if err != nil {
		return err
	}
	defer stop()
	tag := c.tag(op)
	next, prev := mod(c.m.Rank()+1, n), mod(c.m.Rank()-1, n)
	biggest := 0
	for k := range n {
		lo, hi := bounds(k)
		biggest = max(biggest, hi-lo)
	}
	// Segments of about segFor's bytes, in whole elements.
	segE := max(c.segFor(elem*biggest)/elem, 1)
	nseg := func(k int) int {
		lo, hi := bounds(k)
		return (hi - lo + segE - 1) / segE
	}
	seg := func(k, j int) []byte {
		lo, hi := bounds(k)
		a := lo + j*segE
		return data[elem*a : elem*min(a+segE, hi)]
	}
	tmp := make([]byte, elem*min(segE, biggest))
	phase := func(t int) *mesh.Phase {
		if t < n-1 {
			return c.rs
		}
		return c.ag
	}
	send := func(t, k, j int) error { return phase(t).Send(next, tag, seg(k, j)) }
	recv := func(t, k, j int) error {
		dst := seg(k, j)
		if t >= n-1 {
			return c.ag.Recv(prev, tag, dst)
		}
		buf := tmp[:len(dst)]
		if err := c.rs.Recv(prev, tag, buf); err != nil {
			return err
		}
		reduce(dst, buf)
		return nil
	}
	t1 := n - 1
	if gather {
		t1 = 2*n - 2
	}
	return wrap(name, c.ring(0, t1, nseg, send, recv))
}

// RingOrder returns the ranks in the order AllReduce, AllReduceBytes and
// the reduce-scatters accumulate chunk k of a world of n: k+1, k+2, …, k
// (mod n). A reference sum computed in one process in this order (s =
// x_first, then s = x_j + s) equals the ring's bit for bit.
func RingOrder(n, k int) []int {
	out := make([]int, n)
	for i := range n {
		out[i] = mod(k+1+i, n)
	}
	return out
}

// PhaseNames name the byte-counter phases of a Comm's collectives.
type PhaseNames struct {
	ReduceScatter, AllGather, Broadcast, AllToAll, Barrier string
}

// NewWithPhases is New with the collectives counted under other phase
// names: a second Comm on the same mesh for small control exchanges
// (say, all under "meta") keeps the payload phases' counters equal to
// the closed-form volumes. Two Comms on one mesh must not run
// collectives concurrently.
func NewWithPhases(m *mesh.Mesh, opts Options, ph PhaseNames) *Comm {
	c := New(m, opts)
	c.rs, c.ag, c.bc, c.a2a, c.bar = m.Phase(ph.ReduceScatter), m.Phase(ph.AllGather), m.Phase(ph.Broadcast), m.Phase(ph.AllToAll), m.Phase(ph.Barrier)
	return c
}

// OnePhase names every collective's phase name.
func OnePhase(name string) PhaseNames { return PhaseNames{name, name, name, name, name} }
