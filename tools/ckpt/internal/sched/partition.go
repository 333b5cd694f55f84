// Package sched is Gemini's traffic interleaving: Algorithm 6.2 (the
// checkpoint partition algorithm, with the thesis's errata fixed) that cuts
// the m−1 remote replicas of a checkpoint into chunks placed in the
// network's idle spans, and the online profiling that measures those spans.
package sched

import (
	"errors"
	"fmt"
	"math"
)

// Params are Algorithm 6.2's inputs besides the spans. Sizes are in bytes
// (or any unit, as long as Bandwidth uses the same one per second), times
// in seconds.
type Params struct {
	// Size is C, the checkpoint (one rank's shard) size.
	Size float64
	// Replicas is m, the number of replicas including the local one; m−1
	// are sent over the network.
	Replicas int
	// Buffer is R, the receiver's buffer, split into Parts (p) sub-buffers;
	// a chunk is at most R/p.
	Buffer float64
	Parts  int
	// Bandwidth is B and Alpha α: sending s bytes takes f(s) = α + s/B.
	Bandwidth float64
	Alpha     float64
	// Mu ∈ (0,1) is the share of each span used (absorbs span variance).
	Mu float64
}

// Chunk is one scheduled piece: which span it goes in, which remote
// replica (0 … m−2, the destinations in sending order), where it starts
// in the shard and how big it is.
type Chunk struct {
	Span   int     `json:"span"`
	Dest   int     `json:"dest"`
	Offset float64 `json:"offset"`
	Size   float64 `json:"size"`
}

// Schedule is Algorithm 6.2's output.
type Schedule struct {
	Chunks []Chunk `json:"chunks"`
	// PerSpan is the volume placed in each span.
	PerSpan []float64 `json:"per_span"`
	// Overflow is the volume that did not fit in μ·t of the real spans and
	// was placed in the last span (treated as unbounded): it delays the
	// iteration, so the checkpoint frequency should be lowered.
	Overflow float64 `json:"overflow"`
}

func (p Params) check() error {
	switch {
	case p.Size < 0:
		return fmt.Errorf("sched: checkpoint size %g is negative", p.Size)
	case p.Replicas < 1:
		return fmt.Errorf("sched: m = %d replicas (at least 1)", p.Replicas)
	case p.Buffer <= 0 || p.Parts < 1:
		return fmt.Errorf("sched: buffer %g in %d parts (both must be positive)", p.Buffer, p.Parts)
	case p.Bandwidth <= 0 || math.IsInf(p.Bandwidth, 0) || math.IsNaN(p.Bandwidth):
		return fmt.Errorf("sched: bandwidth %g (must be positive and finite)", p.Bandwidth)
	case p.Alpha < 0:
		return fmt.Errorf("sched: α = %g is negative", p.Alpha)
	case !(p.Mu > 0 && p.Mu <= 1):
		return fmt.Errorf("sched: μ = %g (must be in (0, 1])", p.Mu)
	}
	return nil
}

// Partition runs Algorithm 6.2 with the fixes of the seed notes:
//
//  1. line 129 subtracts f(size), not f(remain_size);
//  2. a span with no room for even α leaves the loop instead of spinning;
//  3. the last span is unbounded (μ·∞ = ∞) and takes all the rest;
//  4. m−1 remote replicas are partitioned (the local copy is not sent);
//  5. chunks carry (span, destination, offset, size).
//
// Sizes are continuous; PartitionBytes rounds them to whole bytes.
func Partition(spans []float64, p Params) (*Schedule, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	if len(spans) == 0 {
		return nil, errors.New("sched: no idle spans (need at least one; the last is treated as unbounded)")
	}
	for i, t := range spans {
		if t < 0 || math.IsNaN(t) {
			return nil, fmt.Errorf("sched: span %d is %g s", i, t)
		}
	}
	s := &Schedule{PerSpan: make([]float64, len(spans))}
	s.Chunks = partition(spans, p, true)
	for _, c := range s.Chunks {
		s.PerSpan[c.Span] += c.Size
	}
	// Overflow: what the real spans (last one finite) cannot take.
	var fit float64
	for _, c := range partition(spans, p, false) {
		fit += c.Size
	}
	total := p.Size * float64(p.Replicas-1)
	if of := total - fit; of > 1e-9*math.Max(1, total) {
		s.Overflow = of
	}
	return s, nil
}

func partition(spans []float64, p Params, lastInf bool) []Chunk {
	if p.Replicas < 2 || p.Size == 0 {
		return nil
	}
	f := func(s float64) float64 { return p.Alpha + s/p.Bandwidth }
	maxChunk := p.Buffer / float64(p.Parts)
	var out []Chunk
	dest, remain := 0, p.Size
	eps := 1e-12 * math.Max(1, p.Size)
	for si, t := range spans {
		span := p.Mu * t
		if lastInf && si == len(spans)-1 {
			span = math.Inf(1)
		}
		for span > 0 {
			var size float64
			if span >= f(maxChunk) {
				size = maxChunk
			} else {
				size = math.Max(0, (span-p.Alpha)*p.Bandwidth)
			}
			size = math.Min(remain, size)
			if size <= 0 {
				break // fix 2
			}
			out = append(out, Chunk{Span: si, Dest: dest, Offset: p.Size - remain, Size: size})
			remain -= size
			span -= f(size) // fix 1
			if remain <= eps {
				if dest < p.Replicas-2 { // fix 4: m−1 remote replicas, ids 0..m−2
					dest++
					remain = p.Size
				} else {
					return out
				}
			}
		}
	}
	return out
}

// ByteChunk is a scheduled chunk in whole bytes.
type ByteChunk struct {
	Span   int   `json:"span"`
	Dest   int   `json:"dest"`
	Offset int64 `json:"offset"`
	Size   int64 `json:"size"`
}

// PartitionBytes is Partition for an integer shard size: chunk boundaries
// are rounded down to whole bytes (the last chunk of each replica ends at
// the shard's end), zero-byte chunks are dropped.
func PartitionBytes(spans []float64, p Params) ([]ByteChunk, *Schedule, error) {
	s, err := Partition(spans, p)
	if err != nil {
		return nil, nil, err
	}
	size := int64(p.Size)
	var out []ByteChunk
	for i, c := range s.Chunks {
		start := int64(math.Floor(c.Offset))
		end := int64(math.Floor(c.Offset + c.Size))
		if i+1 == len(s.Chunks) || s.Chunks[i+1].Dest != c.Dest {
			end = size
		}
		if end > size {
			end = size
		}
		if end > start {
			out = append(out, ByteChunk{Span: c.Span, Dest: c.Dest, Offset: start, Size: end - start})
		}
	}
	return out, s, nil
}
