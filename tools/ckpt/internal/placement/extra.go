package placement

import (
	"slices"
	"sort"
)

// Extra is where a failure's temporary copies go (Gemini's recovery while
// no replacement has joined): given the failed machines dead (1-based),
// it returns for every machine i whose checkpoint lost a holder the live
// machines outside s_i that take one more copy of it each, so that the
// checkpoint again has min(m, live machines) copies among live machines.
// Machines whose holders are all dead are absent (a lost group: the
// persistent tier's case), as are machines that lost no holder.
//
// The answer depends on the placement and the set dead only, never on the
// order the failures came in, so every survivor computes the same one.
// Checkpoints are taken in machine order; each copy goes to the live
// non-holder with the fewest extra copies so far, ties broken by ring
// distance after i (i+1, i+2, …), so that the extra load spreads over
// the survivors instead of piling onto i's neighbour.
func (p *Placement) Extra(dead []int) map[int][]int {
	isDead := make(map[int]bool, len(dead))
	for _, d := range dead {
		if d >= 1 && d <= p.N {
			isDead[d] = true
		}
	}
	live := p.N - len(isDead)
	out := map[int][]int{}
	load := make([]int, p.N+1)
	for i := 1; i <= p.N; i++ {
		hs := p.Holders(i)
		have := 0
		for _, h := range hs {
			if !isDead[h] {
				have++
			}
		}
		need := min(p.M, live) - have
		if have == 0 || need <= 0 {
			continue
		}
		var cands []int
		for j := 1; j <= p.N; j++ {
			if !isDead[j] && !slices.Contains(hs, j) {
				cands = append(cands, j)
			}
		}
		dist := func(j int) int { return (j - i + p.N) % p.N }
		sort.Slice(cands, func(a, b int) bool {
			ca, cb := cands[a], cands[b]
			if load[ca] != load[cb] {
				return load[ca] < load[cb]
			}
			return dist(ca) < dist(cb)
		})
		for _, j := range cands[:need] {
			load[j]++
			out[i] = append(out[i], j)
		}
	}
	return out
}
