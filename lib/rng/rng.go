// Package rng is the counter-based random generator every trainwire codec
// and kernel draws from, so that the CPU codecs (lib/codec), the GPU
// kernels (lib/gpu) and every rank of a job derive the same numbers from
// (seed, step, tensor name, purpose), whatever the split of the work among
// threads.
//
// Draw i of the stream keyed K is Mix64(K + (i+1)·Golden), Mix64 being the
// SplitMix64 finaliser, and a stream's key is
//
//	K = XXH3-64( seed as 8 little-endian bytes ‖ step as 8 little-endian bytes ‖ name bytes ‖ purpose byte )
//
// docs/compressor.md ("Randomness") is the normative description.
package rng

import (
	"encoding/binary"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// Golden is the Weyl increment between consecutive draws (2^64/φ).
const Golden = 0x9E3779B97F4A7C15

// Stream purposes, so that one tensor's draws for different uses differ.
const (
	PurposeIndices  byte = 'I' // randomk indices
	PurposeRound    byte = 'R' // stochastic rounding (qsgd, terngrad, natural)
	PurposeWindow   byte = 'W' // mstopk band window
	PurposeSample   byte = 'S' // dgc sample start
	PurposePowerSGD byte = 'P' // powersgd initial Q
)

// Key returns the key of the stream for (seed, step, name, purpose).
func Key(seed uint64, step int64, name string, purpose byte) uint64 {
	b := make([]byte, 0, 17+len(name))
	b = binary.LittleEndian.AppendUint64(b, seed)
	b = binary.LittleEndian.AppendUint64(b, uint64(step))
	b = append(b, name...)
	b = append(b, purpose)
	return xxh3.Hash(b)
}

// Mix64 is the SplitMix64 output function.
func Mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Draw returns draw i of the stream key.
func Draw(key uint64, i uint64) uint64 { return Mix64(key + (i+1)*Golden) }

// Seq is a sequential view of a stream: Next returns draws 0, 1, 2, … of
// Key.
type Seq struct {
	Key, I uint64
}

// Next returns the next draw.
func (s *Seq) Next() uint64 {
	v := Draw(s.Key, s.I)
	s.I++
	return v
}

// Below returns a uniform integer in [0, n) (n > 0) by Lemire's
// multiply-shift with rejection, so it is exactly uniform.
func (s *Seq) Below(n uint64) uint64 {
	hi, lo := bits.Mul64(s.Next(), n)
	if lo < n {
		t := -n % n
		for lo < t {
			hi, lo = bits.Mul64(s.Next(), n)
		}
	}
	return hi
}

// Unit24 turns the top 24 bits of r into a float32 in [0, 1), exactly.
func Unit24(r uint64) float32 { return float32(r>>40) * (1.0 / (1 << 24)) }
