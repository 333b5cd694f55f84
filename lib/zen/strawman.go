package zen

import "fmt"

// Strawman is the data-independent hashing that Zen improves on
// (Algorithm 3 of the paper's appendix): index idx[i] is written to slot
// q of partition p of an n×r memory, where p·r + q = h(idx[i]) for one
// universal hash h onto [n·r) (MurmurHash3 with seed, reduced by
// multiply-shift). Colliding writes overwrite — the last write wins, as
// in a sequential run of the parallel loop — so indices are lost; each
// partition is then read back in slot order (the paper's nonzero()).
//
// It returns the surviving positions into idx per partition and how many
// indices were lost. It exists to measure the loss that motivates
// Algorithm 1 (seed-zen.md §3.2, check T5): with m distinct indices the
// expected lost fraction is L(α) = 1 − (1 − e^{−α})/α at load α = m/(n·r).
// hashsync never partitions with it.
func Strawman(idx []uint32, n, r int, seed uint32) (*Parts, int, error) {
	if n < 1 || r < 1 || int64(n)*int64(r) > 1<<32 {
		return nil, 0, fmt.Errorf("strawman: %d partitions of %d slots: want n, r ≥ 1 and n·r ≤ 2^32", n, r)
	}
	if int64(len(idx)) >= 1<<31 {
		return nil, 0, fmt.Errorf("strawman: %d indices: at most 2^31−1", len(idx))
	}
	nr := uint32(n * r)
	x := make([]int32, n*r) // position + 1; 0 = empty
	for i, v := range idx {
		x[Reduce(MM3(v, seed), nr)] = int32(i + 1)
	}
	p := &Parts{Off: make([]int, n+1)}
	for j := range n {
		for _, s := range x[j*r : (j+1)*r] {
			if s != 0 {
				p.Pos = append(p.Pos, s-1)
			}
		}
		p.Off[j+1] = len(p.Pos)
	}
	return p, len(idx) - len(p.Pos), nil
}
