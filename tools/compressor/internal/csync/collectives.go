package csync

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/tensor"
)

func (s *Syncer) input(u *Unit) codec.Input {
	return codec.Input{Name: u.Name, Step: u.Step, Shape: u.Shape, Data: u.Data}
}

// checkSize checks this rank's own payload against the codec's layout.
func checkSize(name string, got int, want int64) error {
	if want >= 0 && int64(got) != want {
		return fmt.Errorf("tensor %q: the codec wrote %d payload bytes, its layout says %d", name, got, want)
	}
	return nil
}

// AddF32LE is the ring's ⊕ for little-endian f32 values: dst += src.
func AddF32LE(dst, src []byte) {
	for i := 0; i+4 <= len(dst); i += 4 {
		a := math.Float32frombits(binary.LittleEndian.Uint32(dst[i:]))
		b := math.Float32frombits(binary.LittleEndian.Uint32(src[i:]))
		binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(a+b))
	}
}

// HalfReducer is the ring's ⊕ for fp16 or bf16: both blocks decoded to
// f32 (exact), added, and the sum rounded back to the half type (nearest,
// ties to even; an fp16 sum past ±65504 is ±Inf, as a cast gives):
// codec.AddHalves, one fused pass.
func HalfReducer(algo string) collective.Reducer {
	bf16 := algo == "bf16"
	return func(dst, src []byte) { codec.AddHalves(dst, src, bf16) }
}

// chunkBounds are the bounds of partition c of P over d elements of m
// each (codec.Split's): [c·m, min((c+1)·m, d)), empty past d.
func chunkBounds(d, m, c int) (int, int) {
	lo := min(c*m, d)
	return lo, min(lo+m, d)
}

// partitioned runs A2AAG and A2ADense (Partitioned: partitionedAll).
func (s *Syncer) partitioned(ctx context.Context, u *Unit, sp Spec, st *Stats) ([]float32, error) {
	n, r := s.n, s.r
	d := len(u.Data)
	m := int(codec.PartLen(int64(d), n))
	cshape := []int64{int64(m)}
	chunks, err := codec.Split(s.input(u), n)
	if err != nil {
		return nil, s.local(err)
	}
	size, err := s.size(sp.Codec, cshape, u.Step)
	if err != nil {
		return nil, err
	}
	var send []byte
	sendCounts := make([]int, n)
	var mySent []float32
	for c := range n {
		f, sent, err := s.encode(sp, "", chunks[c], st)
		if err != nil {
			return nil, err
		}
		pl := payload(f)
		if err := checkSize(f.Name, len(pl), size); err != nil {
			return nil, s.local(err)
		}
		send = append(send, pl...)
		sendCounts[c] = len(pl)
		if c == r {
			mySent = sent
		}
	}
	// all[p·n + c]: the size of rank p's chunk c.
	all, err := s.counts(ctx, size >= 0, sendCounts)
	if err != nil {
		return nil, err
	}
	recvCounts := make([]int, n)
	for p := range n {
		recvCounts[p] = all[p*n+r]
	}
	recv := make([]byte, sum(recvCounts))
	if err := s.comm.AllToAllVBytes(ctx, send, sendCounts, recv, recvCounts); err != nil {
		return nil, err
	}
	ro := offsetsOf(recvCounts)
	result := tensor.Alloc(d)
	var scratch []float32
	if sp.Collective == A2AAG {
		// Rank q contributes what it received: every rank's chunk q.
		gc := make([]int, n)
		for q := range n {
			for p := range n {
				gc[q] += all[p*n+q]
			}
		}
		out := make([]byte, sum(gc))
		if err := s.comm.AllGatherVBytes(ctx, recv, gc, out); err != nil {
			return nil, err
		}
		goff := offsetsOf(gc)
		acc := tensor.Alloc(m)
		for c := range n {
			clear(acc)
			off := goff[c]
			for p := range n {
				b := out[off : off+all[p*n+c]]
				off += all[p*n+c]
				fp, err := s.frameOf(sp.Codec, codec.PartName(u.Name, c, n), u.Step, cshape, p, b)
				if err != nil {
					return nil, err
				}
				if err := s.addFrame(acc, fp, &scratch, p); err != nil {
					return nil, err
				}
			}
			lo, hi := chunkBounds(d, m, c)
			copy(result[lo:hi], acc)
		}
		return result, nil
	}
	// The sum of this rank's chunk, in rank order.
	myName := codec.PartName(u.Name, r, n)
	acc := tensor.Alloc(m)
	for p := range n {
		if p == r {
			tensor.Add(acc, mySent)
			continue
		}
		fp, err := s.frameOf(sp.Codec, myName, u.Step, cshape, p, recv[ro[p]:ro[p+1]])
		if err != nil {
			return nil, err
		}
		if err := s.addFrame(acc, fp, &scratch, p); err != nil {
			return nil, err
		}
	}
	counts := make([]int, n)
	for c := range n {
		lo, hi := chunkBounds(d, m, c)
		counts[c] = hi - lo
	}
	return result, s.comm.AllGatherV(ctx, acc[:counts[r]], counts, result)
}

// rsag: a dense reduce-scatter, this rank's chunk of the sum compressed
// (its own error feedback, chunk name NAME[r/n]), the frames allgathered
// and decoded into their chunks.
func (s *Syncer) rsag(ctx context.Context, u *Unit, sp Spec, st *Stats) ([]float32, error) {
	n, r := s.n, s.r
	d := len(u.Data)
	x := tensor.Alloc(d)
	copy(x, u.Data)
	lo, hi, err := s.comm.ReduceScatter(ctx, x)
	if err != nil {
		return nil, err
	}
	name := codec.PartName(u.Name, r, n)
	g, sent, err := s.encode(sp, "", codec.Input{Name: name, Step: u.Step, Shape: []int64{int64(hi - lo)}, Data: x[lo:hi]}, st)
	if err != nil {
		return nil, err
	}
	pl := payload(g)
	sizes := make([]int, n)
	fixed := true
	for k := range n {
		a, b := collective.Chunk(d, n, k)
		sz, err := s.size(sp.Codec, []int64{int64(b - a)}, u.Step)
		if err != nil {
			return nil, err
		}
		fixed = fixed && sz >= 0
		sizes[k] = int(sz)
	}
	if fixed {
		if err := checkSize(name, len(pl), int64(sizes[r])); err != nil {
			return nil, s.local(err)
		}
	} else if sizes, err = s.counts(ctx, false, []int{len(pl)}); err != nil {
		return nil, err
	}
	out := make([]byte, sum(sizes))
	if err := s.comm.AllGatherVBytes(ctx, pl, sizes, out); err != nil {
		return nil, err
	}
	off := offsetsOf(sizes)
	result := tensor.Alloc(d)
	for k := range n {
		a, b := collective.Chunk(d, n, k)
		if k == r {
			copy(result[a:b], sent)
			continue
		}
		fk, err := s.frameOf(sp.Codec, codec.PartName(u.Name, k, n), u.Step, []int64{int64(b - a)}, k, out[off[k]:off[k+1]])
		if err != nil {
			return nil, err
		}
		if _, err := codec.DecodeLimit(fk, result[a:b], s.MaxBytes); err != nil {
			return nil, fmt.Errorf("rank %d's frame: %w", k, err)
		}
	}
	return result, nil
}
