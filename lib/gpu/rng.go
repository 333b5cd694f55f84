package gpu

import (
	"encoding/binary"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// The random draws of lib/codec (docs/compressor.md, "Randomness"),
// reproduced so that the GPU path draws the same numbers: draw i of the
// stream keyed K is mix64(K + (i+1)·γ); K = XXH3-64(seed LE ‖ step LE ‖
// name ‖ purpose). The parity tests check these against lib/codec's frames.

const golden = 0x9E3779B97F4A7C15

const (
	purposeRound  byte = 'R' // stochastic rounding (qsgd, terngrad)
	purposeWindow byte = 'W' // mstopk band window
)

func streamKey(seed uint64, step int64, name string, purpose byte) uint64 {
	b := make([]byte, 0, 17+len(name))
	b = binary.LittleEndian.AppendUint64(b, seed)
	b = binary.LittleEndian.AppendUint64(b, uint64(step))
	b = append(b, name...)
	b = append(b, purpose)
	return xxh3.Hash(b)
}

func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

func draw(key, i uint64) uint64 { return mix64(key + (i+1)*golden) }

// below returns draw-sequence-uniform integer in [0, n) from the stream
// key starting at draw 0 (Lemire's multiply-shift with rejection), as
// lib/codec's seq.below on a fresh sequence.
func below(key uint64, n uint64) uint64 {
	i := uint64(0)
	next := func() uint64 { v := draw(key, i); i++; return v }
	hi, lo := bits.Mul64(next(), n)
	if lo < n {
		t := -n % n
		for lo < t {
			hi, lo = bits.Mul64(next(), n)
		}
	}
	return hi
}
