package csync

import (
	"context"
	"fmt"
	"slices"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// The batched collectives: every job of a bucket in one collective call
// (and, for allgather with data-dependent sizes, one size exchange), each
// job's result computed exactly as it would be alone.

// prepareEncoded encodes an allgather or ring job: its payload, checked
// against the codec's layout, and its own decoded encoding.
func (s *Syncer) prepareEncoded(j *job) error {
	st := &Stats{Times: map[string]float64{}}
	// An allgathered sparsifier's own frame is added like the others'
	// (addSparse, the same bits as its dense decoding): no dense copy.
	// A ring reduces the encodings and decodes the sum: it needs neither.
	own := j.sp.Collective == AllGather && sparseAlgos[j.sp.Codec.Algo()]
	f, sent, err := s.encodeOpt(j.sp, "", s.input(j.u), st, own || j.sp.Collective == Ring)
	j.encode += st.Times["encode"]
	if err != nil {
		return err
	}
	j.pl, j.sent = payload(f), sent
	if own {
		j.frame = f
	}
	if a := j.sp.Codec.Algo(); j.sp.Collective == Ring && a != "fp16" && a != "bf16" {
		// The ring reduces in place: a payload that may share memory
		// with the input is copied (fp16 and bf16 encode into a fresh
		// buffer).
		j.pl = slices.Clone(j.pl)
	}
	if j.size, err = s.size(j.sp.Codec, j.u.shape(), j.u.Step); err != nil {
		return err
	}
	if err := checkSize(j.u.Name, len(j.pl), j.size); err != nil {
		return s.local(err)
	}
	return nil
}

// denseAll: one ring allreduce of every job's f32 tensor.
func (s *Syncer) denseAll(ctx context.Context, jobs []*job) error {
	bufs := make([][]byte, len(jobs))
	for i, j := range jobs {
		j.out = s.out.Get(len(j.u.Data))
		copy(j.out, j.u.Data)
		bufs[i] = f32Bytes(j.out)
	}
	if err := s.comm.AllReduceBytesMulti(ctx, bufs, 4, addF32); err != nil {
		return err
	}
	for i, j := range jobs {
		setF32(j.out, bufs[i])
	}
	return nil
}

// f32Bytes is x's bytes: a view where tensor views are zero-copy, else an
// encoded copy (setF32 copies it back).
func f32Bytes(x []float32) []byte {
	if tensor.ZeroCopy {
		return tensor.Bytes(x)
	}
	b := make([]byte, 4*len(x))
	tensor.EncodeLE(b, x)
	return b
}

func setF32(x []float32, b []byte) {
	if !tensor.ZeroCopy {
		tensor.DecodeLE(x, b)
	}
}

// addF32 is the dense ring's ⊕, AllReduce's dst += src.
func addF32(dst, src []byte) {
	if tensor.ZeroCopy {
		tensor.Add(tensor.Float32s(dst), tensor.Float32s(src))
		return
	}
	AddF32LE(dst, src)
}

// allgatherAll: every job's payload to every rank in one allgather (rank
// p's block: its payloads in job order), each decoded and added in rank
// order (this rank's own from its decoded encoding).
func (s *Syncer) allgatherAll(ctx context.Context, jobs []*job) error {
	k := len(jobs)
	mine := make([]int, k)
	fixed := true
	var send []byte
	for i, j := range jobs {
		mine[i] = len(j.pl)
		fixed = fixed && j.size >= 0
		send = append(send, j.pl...)
	}
	if k == 1 {
		send = jobs[0].pl
	}
	sizes, err := s.counts(ctx, fixed, mine)
	if err != nil {
		return err
	}
	perRank := make([]int, s.n)
	for p := range s.n {
		perRank[p] = sum(sizes[p*k : (p+1)*k])
	}
	out := make([]byte, sum(perRank))
	if err := s.comm.AllGatherVBytes(ctx, send, perRank, out); err != nil {
		return err
	}
	// at[p]: where rank p's payload of the current job starts.
	at := offsetsOf(perRank)[:s.n]
	var scratch []float32
	frames := make([]*wire.Compressed, s.n)
	for i, j := range jobs {
		acc := s.out.Get(len(j.u.Data))
		// A sparsifier's frames are checked first and summed together
		// (sumSparse); any other codec's added one by one as they decode.
		sparse := j.frame != nil
		if !sparse {
			clear(acc)
		}
		for p := range s.n {
			b := out[at[p] : at[p]+sizes[p*k+i]]
			at[p] += sizes[p*k+i]
			if p == s.r {
				if sparse {
					frames[p] = j.frame
				} else {
					tensor.Add(acc, j.sent)
				}
				continue
			}
			fp, err := s.frameOf(j.sp.Codec, j.u.Name, j.u.Step, j.u.shape(), p, b)
			if err != nil {
				return fmt.Errorf("tensor %q: %w", j.u.Name, err)
			}
			if sparse {
				if _, err := codec.FromFrame(fp); err != nil {
					return fmt.Errorf("tensor %q: rank %d's frame: %w", j.u.Name, p, err)
				}
				frames[p] = fp
				continue
			}
			if err := s.addFrame(acc, fp, &scratch, p); err != nil {
				return fmt.Errorf("tensor %q: %w", j.u.Name, err)
			}
		}
		if sparse {
			sumSparse(acc, frames)
		}
		j.out = acc
	}
	return nil
}

// ringAll: one ring allreduce in the encoded domain of every job's
// payload (all of one codec), each decoded.
func (s *Syncer) ringAll(ctx context.Context, jobs []*job) error {
	elem, red := 4, collective.Reducer(AddF32LE)
	if a := jobs[0].sp.Codec.Algo(); a == "fp16" || a == "bf16" {
		elem, red = 2, HalfReducer(a)
	}
	bufs := make([][]byte, len(jobs))
	for i, j := range jobs {
		bufs[i] = j.pl
	}
	if err := s.comm.AllReduceBytesMulti(ctx, bufs, elem, red); err != nil {
		return err
	}
	for _, j := range jobs {
		fr, err := s.frameOf(j.sp.Codec, j.u.Name, j.u.Step, j.u.shape(), -1, j.pl)
		if err != nil {
			return err
		}
		if j.out, err = codec.DecodeLimit(fr, s.out.Get(len(j.u.Data)), s.MaxBytes); err != nil {
			return fmt.Errorf("tensor %q: %w", j.u.Name, err)
		}
	}
	return nil
}

// psgdJob is a PowerSGD job between its steps.
type psgdJob struct {
	pl    codec.PowerSGDPlan
	mem   codec.Memory
	state *codec.State
	M     []float32
	// P, then Q for a matrix; x (M, all-reduced uncompressed) otherwise.
	P, Q, x []float32
}

// preparePowerSGD compensates the tensor with its error feedback and
// computes P = M·Q (a matrix) or the vector to all-reduce.
func (s *Syncer) preparePowerSGD(j *job) error {
	pl, err := codec.PowerSGDPlanFor(j.sp.Codec, j.u.shape())
	if err != nil {
		return err
	}
	mem, err := codec.NewMemory(j.sp.Memory, j.sp.MemOpts)
	if err != nil {
		return s.local(err)
	}
	s.storeMu.Lock()
	state := s.Store.Get(j.u.Name)
	s.storeMu.Unlock()
	ps := &psgdJob{pl: pl, mem: mem, state: state}
	// M in the residual's own slot (Update then sets e ← M − sent in
	// place), else a fresh M after the finiteness check.
	var inPlace bool
	if ps.M, inPlace = codec.CompensateInPlace(mem, state, j.u.Data); !inPlace {
		if err := codec.CheckFinite(j.u.Name, j.u.Data); err != nil {
			return s.local(err)
		}
		ps.M = mem.Compensate(state, j.u.Data)
	}
	if !pl.Matrix {
		ps.x = tensor.Alloc(len(ps.M))
		copy(ps.x, ps.M)
		mem.Update(state, ps.M, ps.M, &wire.Compressed{})
	} else {
		ps.P = pl.P(ps.M, pl.WarmQ(j.u.Name, state))
	}
	j.ps = ps
	return nil
}

// powersgdAll: P = M·Q of every matrix and every vector all-reduced in
// one ring; each P orthonormalised, Q = Mᵀ·P̂; the Qs all-reduced in a
// second ring; each result P̂·(ΣQ)ᵀ. This rank's error feedback keeps
// M − P̂·Q_rᵀ (its own share of the result); ΣQ is every rank's next warm
// start.
func (s *Syncer) powersgdAll(ctx context.Context, jobs []*job) error {
	var bufs [][]byte
	for _, j := range jobs {
		if j.ps.pl.Matrix {
			bufs = append(bufs, f32Bytes(j.ps.P))
		} else {
			bufs = append(bufs, f32Bytes(j.ps.x))
		}
	}
	if err := s.comm.AllReduceBytesMulti(ctx, bufs, 4, addF32); err != nil {
		return err
	}
	var qs [][]byte
	for i, j := range jobs {
		ps := j.ps
		if !ps.pl.Matrix {
			setF32(ps.x, bufs[i])
			j.out = ps.x
			continue
		}
		setF32(ps.P, bufs[i])
		ps.pl.Orthonormalize(ps.P)
		ps.Q = ps.pl.Q(ps.M, ps.P)
		sent := s.out.Get(len(ps.M)) // Decode sets every element
		ps.pl.Decode(sent, ps.P, ps.Q)
		ps.mem.Update(ps.state, ps.M, sent, &wire.Compressed{})
		s.out.Put(sent)
		qs = append(qs, f32Bytes(ps.Q))
	}
	if err := s.comm.AllReduceBytesMulti(ctx, qs, 4, addF32); err != nil {
		return err
	}
	i := 0
	for _, j := range jobs {
		ps := j.ps
		if !ps.pl.Matrix {
			continue
		}
		setF32(ps.Q, qs[i])
		i++
		ps.pl.SetQ(ps.state, ps.Q)
		j.out = s.out.Get(len(ps.M))
		ps.pl.Decode(j.out, ps.P, ps.Q)
		j.ps = nil
	}
	return nil
}
