package engine

import (
	"fmt"
	"slices"
	"time"

	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/tensor"
)

// ringAllReduce sums v over members (this rank among them) in place with
// the bandwidth-optimal ring: n−1 reduce-scatter steps, then n−1
// allgather steps. Chunks travel as Data messages keyed by (round, epoch,
// step), so a chunk that arrives early waits in the mailbox and one from
// an abandoned epoch is never mistaken for a current one. cancel aborts
// the attempt; a dead neighbour fails it with a *mesh.PeerError.
func (t *transport) ringAllReduce(v []float32, members []int, round uint64, epoch uint32, cancel <-chan struct{}, timeout time.Duration) error {
	n := len(members)
	if n <= 1 {
		return nil
	}
	idx := slices.Index(members, t.rank)
	next, prev := members[(idx+1)%n], members[(idx+n-1)%n]
	chunk := func(i int) []float32 {
		lo, hi := collective.Chunk(len(v), n, ((i%n)+n)%n)
		return v[lo:hi]
	}
	for s := 0; s < 2*(n-1); s++ {
		var out, in []float32
		if s < n-1 {
			out, in = chunk(idx-s), chunk(idx-s-1)
		} else {
			t := s - (n - 1)
			out, in = chunk(idx+1-t), chunk(idx-t)
		}
		msg := Msg{Kind: KindData, Round: round, Epoch: epoch, Step: uint32(s), Data: tensor.Bytes(out)}
		if err := t.send(next, msg); err != nil {
			return err
		}
		b, err := t.recvData(mkey{round, epoch, uint32(s), prev}, cancel, timeout)
		if err != nil {
			return err
		}
		if len(b) != 4*len(in) {
			return &ringSizeError{from: prev, got: len(b) / 4, want: len(in)}
		}
		if s < n-1 {
			tensor.Add(in, tensor.Float32sOrCopy(b))
		} else {
			tensor.DecodeLE(in, b)
		}
	}
	return nil
}

type ringSizeError struct{ from, got, want int }

func (e *ringSizeError) Error() string {
	return fmt.Sprintf("rank %d sent a chunk of %d elements, want %d (gradients of different sizes on different ranks?)", e.from, e.got, e.want)
}
