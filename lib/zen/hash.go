// Package zen is Zen's balanced parallelism without the network: the
// MurmurHash3 functions, the two-level hierarchical hashing partitioner of
// Algorithm 1 (with compare-and-swap instead of read-after-write), the
// equivalent counting-sort partitioner, the sorted per-server index sets
// 𝕀_j with their rank map, and the hash bitmap of Algorithm 2.
//
// Indices are row indices (uint32): an embedding gradient is row-sparse, and
// element-level COO is the special case of width 1.
package zen

import "math/bits"

// MM3 is MurmurHash3_x86_32 of the 4-byte little-endian encoding of key.
func MM3(key, seed uint32) uint32 {
	k := key * 0xcc9e2d51
	k = bits.RotateLeft32(k, 15)
	k *= 0x1b873593
	h := seed ^ k
	h = bits.RotateLeft32(h, 13)
	h = h*5 + 0xe6546b64
	h ^= 4
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// Reduce maps a 32-bit hash onto [0, n) with Lemire's multiply-shift, which
// is as uniform as a modulo and avoids the division.
func Reduce(h uint32, n uint32) uint32 { return uint32((uint64(h) * uint64(n)) >> 32) }

// H0 is the first-level hash: the partition (server) of row idx among n.
// It depends only on (idx, seed), never on the other indices present, so
// every worker sends a row to the same server.
func H0(idx, seed uint32, n int) int { return int(Reduce(MM3(idx, seed), uint32(n))) }

// Seeds are the hash seeds every rank must agree on: Seeds[0] drives h0,
// Seeds[1..k] the second-level functions h1..hk.
type Seeds []uint32

// DefaultSeeds derives 1+k seeds from one base seed (43+s, as the authors'
// DRAGONN kernels did, offset by the base).
func DefaultSeeds(base uint32, k int) Seeds {
	s := make(Seeds, k+1)
	for i := range s {
		s[i] = base + 43 + uint32(i)
	}
	return s
}
