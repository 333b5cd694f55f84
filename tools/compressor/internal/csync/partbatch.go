package csync

import (
	"context"
	"fmt"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/tensor"
)

// Espresso's partitioned scheme (C > F1:A2A* > D > C > F2:AG* > D) for a
// bucket of jobs: one alltoall of every job's chunks (destination-major),
// one allgather of every job's re-compressed chunk sum; each job computed
// as partitioned computes it alone.

// partJob is a partitioned job's chunks between its steps.
type partJob struct {
	m     int      // chunk length
	parts [][]byte // this rank's chunk payloads, by destination
	acc   []float32
	pl    []byte // the re-compressed sum of this rank's chunk
	sent2 []float32
}

// preparePartitioned compresses the job's n chunks.
func (s *Syncer) preparePartitioned(j *job) error {
	n := s.n
	pj := &partJob{m: int(codec.PartLen(int64(len(j.u.Data)), n))}
	chunks, err := codec.Split(s.input(j.u), n)
	if err != nil {
		return s.local(err)
	}
	if j.size, err = s.size(j.sp.Codec, []int64{int64(pj.m)}, j.u.Step); err != nil {
		return err
	}
	st := &Stats{Times: map[string]float64{}}
	defer func() { j.encode += st.Times["encode"] }()
	// A sparsifier's own chunk is added from its frame, like the others'
	// (addSparse); the other chunks' dense decodings are never needed.
	sparse := sparseAlgos[j.sp.Codec.Algo()]
	for c := range n {
		f, sent, err := s.encodeOpt(j.sp, "", chunks[c], st, sparse || c != s.r)
		if err != nil {
			return err
		}
		pl := payload(f)
		if err := checkSize(f.Name, len(pl), j.size); err != nil {
			return s.local(err)
		}
		pj.parts = append(pj.parts, pl)
		if c == s.r {
			j.sent = sent
			if sparse {
				j.frame = f
			}
		}
	}
	j.part = pj
	return nil
}

// partitionedAll runs a bucket of partitioned jobs.
func (s *Syncer) partitionedAll(ctx context.Context, jobs []*job) error {
	n, r, k := s.n, s.r, len(jobs)
	fixed := true
	mine := make([]int, 0, n*k) // destination-major: mine[c·k + i]
	var send []byte
	sendCounts := make([]int, n)
	for c := range n {
		for _, j := range jobs {
			fixed = fixed && j.size >= 0
			mine = append(mine, len(j.part.parts[c]))
			send = append(send, j.part.parts[c]...)
			sendCounts[c] += len(j.part.parts[c])
		}
	}
	// all[p·n·k + c·k + i]: rank p's chunk c of job i.
	all, err := s.counts(ctx, fixed, mine)
	if err != nil {
		return err
	}
	at := func(p, c, i int) int { return all[p*n*k+c*k+i] }
	recvCounts := make([]int, n)
	for p := range n {
		for i := range k {
			recvCounts[p] += at(p, r, i)
		}
	}
	recv := make([]byte, sum(recvCounts))
	if err := s.comm.AllToAllVBytes(ctx, send, sendCounts, recv, recvCounts); err != nil {
		return err
	}
	if err := s.sumChunks(jobs, recv, recvCounts, at); err != nil {
		return err
	}
	return s.gatherChunks(ctx, jobs, fixed)
}

// sumChunks sums every job's chunk r in rank order (this rank's own from
// its decoded encoding) and re-compresses it (compression point "ag").
func (s *Syncer) sumChunks(jobs []*job, recv []byte, recvCounts []int, at func(p, c, i int) int) error {
	n, r := s.n, s.r
	ro := offsetsOf(recvCounts)
	var scratch []float32
	for i, j := range jobs {
		pj := j.part
		name := codec.PartName(j.u.Name, r, n)
		cshape := []int64{int64(pj.m)}
		pj.acc = tensor.Alloc(pj.m)
		for p := range n {
			b := recv[ro[p] : ro[p]+at(p, r, i)]
			ro[p] += at(p, r, i)
			if p == r {
				if j.frame != nil {
					addSparse(pj.acc, j.frame)
				} else {
					tensor.Add(pj.acc, j.sent)
				}
				continue
			}
			fp, err := s.frameOf(j.sp.Codec, name, j.u.Step, cshape, p, b)
			if err != nil {
				return fmt.Errorf("tensor %q: %w", j.u.Name, err)
			}
			if err := s.addFrame(pj.acc, fp, &scratch, p); err != nil {
				return fmt.Errorf("tensor %q: %w", j.u.Name, err)
			}
		}
		st := &Stats{Times: map[string]float64{}}
		g, sent2, err := s.encode(j.sp, "ag", codec.Input{Name: name, Step: j.u.Step, Shape: cshape, Data: pj.acc}, st)
		j.encode += st.Times["encode"]
		if err != nil {
			return err
		}
		pj.pl, pj.sent2 = payload(g), sent2
		if err := checkSize(name, len(pj.pl), j.size); err != nil {
			return s.local(err)
		}
	}
	return nil
}

// gatherChunks allgathers every job's re-compressed chunk sum (rank c's
// block: its chunk c of every job) and decodes them into the results.
func (s *Syncer) gatherChunks(ctx context.Context, jobs []*job, fixed bool) error {
	n, r, k := s.n, s.r, len(jobs)
	mine := make([]int, k)
	var send []byte
	for i, j := range jobs {
		mine[i] = len(j.part.pl)
		send = append(send, j.part.pl...)
	}
	sizes, err := s.counts(ctx, fixed, mine)
	if err != nil {
		return err
	}
	perRank := make([]int, n)
	for p := range n {
		perRank[p] = sum(sizes[p*k : (p+1)*k])
	}
	out := make([]byte, sum(perRank))
	if err := s.comm.AllGatherVBytes(ctx, send, perRank, out); err != nil {
		return err
	}
	at := offsetsOf(perRank)[:n]
	for i, j := range jobs {
		pj := j.part
		d := len(j.u.Data)
		j.out = s.out.Get(d) // every chunk is copied in below
		dec := tensor.Alloc(pj.m)
		for c := range n {
			b := out[at[c] : at[c]+sizes[c*k+i]]
			at[c] += sizes[c*k+i]
			lo, hi := chunkBounds(d, pj.m, c)
			if c == r {
				copy(j.out[lo:hi], pj.sent2)
				continue
			}
			fc, err := s.frameOf(j.sp.Codec, codec.PartName(j.u.Name, c, n), j.u.Step, []int64{int64(pj.m)}, c, b)
			if err != nil {
				return fmt.Errorf("tensor %q: %w", j.u.Name, err)
			}
			if _, err := codec.DecodeLimit(fc, dec, s.MaxBytes); err != nil {
				return fmt.Errorf("tensor %q: rank %d's frame: %w", j.u.Name, c, err)
			}
			copy(j.out[lo:hi], dec)
		}
		j.part = nil
	}
	return nil
}
