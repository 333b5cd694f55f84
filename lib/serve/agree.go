package serve

import (
	"context"
	"encoding/binary"
	"fmt"

	"trainwire.dev/lib/collective"
)

// Verdict is one rank's view of a collective request before it runs: what
// it asks for, or why it refused it.
type Verdict struct {
	Step    int64
	Tensors int
	// Bytes is the tensors' size for a sync; AllToAllBytes for an
	// alltoall (whose sizes differ from rank to rank).
	Bytes int64
	// Bad is why this rank refused its request ("" when it is fine).
	Bad string
}

// AllToAllBytes is Verdict.Bytes of an alltoall request: a sync and an
// alltoall in the same place of the sequence disagree.
const AllToAllBytes = -1

// Agreer makes every rank's sidecar agree on a collective request before
// its tensors move: each rank refused nothing, and all ask for the same
// step, tensor count and bytes.
type Agreer interface {
	Agree(ctx context.Context, seq int64, v Verdict) error
}

// MeshAgreer agrees over a mesh: an allgather of a 128-byte record per rank.
type MeshAgreer struct{ Comm *collective.Comm }

const recordLen = 128

// RejectedError is another rank's refusal of its request for the same
// collective.
type RejectedError struct {
	Seq  int64
	Rank int
	Why  string
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("collective #%d: rank %d refused its request: %s", e.Seq, e.Rank, e.Why)
}

// FailedRank is the rank at fault.
func (e *RejectedError) FailedRank() int { return e.Rank }

// MismatchError is a disagreement between ranks about a request.
type MismatchError struct {
	Seq          int64
	Rank         int
	Theirs, Mine string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("collective #%d: rank %d asks for %s, this rank for %s (every rank must make the same requests in the same order)", e.Seq, e.Rank, e.Theirs, e.Mine)
}

// FailedRank is the rank that disagrees.
func (e *MismatchError) FailedRank() int { return e.Rank }

func (v Verdict) String() string {
	if v.Bytes == AllToAllBytes {
		return fmt.Sprintf("step %d, an alltoall of %d tensors", v.Step, v.Tensors)
	}
	return fmt.Sprintf("step %d with %d tensors of %d bytes", v.Step, v.Tensors, v.Bytes)
}

// Agree allgathers every rank's verdict and returns the first refusal (by
// rank), else the first disagreement with this rank's, else nil.
func (a MeshAgreer) Agree(ctx context.Context, seq int64, v Verdict) error {
	n, me := a.Comm.World(), a.Comm.Rank()
	out := make([]byte, n*recordLen)
	counts := make([]int, n)
	for i := range counts {
		counts[i] = recordLen
	}
	if err := a.Comm.AllGatherVBytes(ctx, encodeVerdict(v), counts, out); err != nil {
		return err
	}
	for r := range n {
		if th := decodeVerdict(out[r*recordLen:]); th.Bad != "" && r != me {
			return &RejectedError{Seq: seq, Rank: r, Why: th.Bad}
		}
	}
	for r := range n {
		th := decodeVerdict(out[r*recordLen:])
		th.Bad = ""
		if th != (Verdict{Step: v.Step, Tensors: v.Tensors, Bytes: v.Bytes}) && v.Bad == "" {
			return &MismatchError{Seq: seq, Rank: r, Theirs: th.String(), Mine: v.String()}
		}
	}
	return nil
}

// encodeVerdict: bad (u8), step (i64), tensors (u32), bytes (i64), the
// reason's length (u8) and up to 100 bytes of it; little-endian.
func encodeVerdict(v Verdict) []byte {
	b := make([]byte, recordLen)
	if v.Bad != "" {
		b[0] = 1
	}
	binary.LittleEndian.PutUint64(b[1:], uint64(v.Step))
	binary.LittleEndian.PutUint32(b[9:], uint32(v.Tensors))
	binary.LittleEndian.PutUint64(b[13:], uint64(v.Bytes))
	why := v.Bad
	if len(why) > recordLen-22 {
		why = why[:recordLen-22]
	}
	b[21] = byte(len(why))
	copy(b[22:], why)
	return b
}

func decodeVerdict(b []byte) Verdict {
	v := Verdict{Step: int64(binary.LittleEndian.Uint64(b[1:])), Tensors: int(binary.LittleEndian.Uint32(b[9:])),
		Bytes: int64(binary.LittleEndian.Uint64(b[13:]))}
	if b[0] != 0 {
		n := min(int(b[21]), recordLen-22)
		v.Bad = string(b[22 : 22+n])
		if v.Bad == "" {
			v.Bad = "(no reason given)"
		}
	}
	return v
}
