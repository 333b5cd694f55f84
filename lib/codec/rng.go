package codec

import (
	"encoding/binary"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// The random draws of every codec come from a counter-based generator:
// draw i of a stream keyed K is mix64(K + (i+1)·γ) with γ = 0x9E3779B97F4A7C15
// and mix64 the SplitMix64 finaliser. A stream's key is
//
//	K = XXH3-64( seed as 8 little-endian bytes ‖ step as 8 little-endian bytes ‖ name bytes ‖ purpose byte )
//
// so every rank derives the same draws from (seed, name, step), and draw i
// does not depend on how the work is split among goroutines.

const golden = 0x9E3779B97F4A7C15

// Stream purposes, so that one tensor's draws for different uses differ.
const (
	purposeIndices  byte = 'I' // randomk indices
	purposeRound    byte = 'R' // stochastic rounding (qsgd, terngrad, natural)
	purposeWindow   byte = 'W' // mstopk band window
	purposeSample   byte = 'S' // dgc sample start
	purposePowerSGD byte = 'P' // powersgd initial Q
)

// streamKey returns the key of the stream for (seed, step, name, purpose).
func streamKey(seed uint64, step int64, name string, purpose byte) uint64 {
	b := make([]byte, 0, 17+len(name))
	b = binary.LittleEndian.AppendUint64(b, seed)
	b = binary.LittleEndian.AppendUint64(b, uint64(step))
	b = append(b, name...)
	b = append(b, purpose)
	return xxh3.Hash(b)
}

// mix64 is the SplitMix64 output function.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// draw returns draw i of stream key.
func draw(key uint64, i uint64) uint64 { return mix64(key + (i+1)*golden) }

// seq is a sequential view of a stream.
type seq struct {
	key, i uint64
}

func (s *seq) next() uint64 {
	v := draw(s.key, s.i)
	s.i++
	return v
}

// below returns a uniform integer in [0, n) (n > 0) by Lemire's
// multiply-shift with rejection, so it is exactly uniform.
func (s *seq) below(n uint64) uint64 {
	hi, lo := mul64(s.next(), n)
	if lo < n {
		t := -n % n
		for lo < t {
			hi, lo = mul64(s.next(), n)
		}
	}
	return hi
}

func mul64(a, b uint64) (hi, lo uint64) { return bits.Mul64(a, b) }

// unit24 turns the top 24 bits of r into a float32 in [0, 1), exactly.
func unit24(r uint64) float32 { return float32(r>>40) * (1.0 / (1 << 24)) }
