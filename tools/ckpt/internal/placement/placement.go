// Package placement is Gemini's checkpoint placement (Algorithm 6.1 of the
// thesis, "mixed" placement) and the recovery-probability arithmetic around
// it (Corollary 6.1, the exact inclusion–exclusion value, enumeration).
//
// Machine IDs are 1-based, as in the thesis; Rank converts to 0-based ranks.
package placement

import (
	"fmt"
	"sort"
)

// Strategy names what Algorithm 6.1 chose.
const (
	// Group: m divides N, N/m groups of m machines, each machine sends its
	// checkpoint to the m−1 others of its group.
	Group = "group"
	// Mixed: m does not divide N; the first ⌊N/m⌋−1 groups use group
	// placement and the last m+q machines form a ring.
	Mixed = "mixed"
)

// Placement is the result of Algorithm 6.1 for N machines and m replicas.
type Placement struct {
	// N is the number of machines, M the number of replicas (the local one
	// included).
	N, M int
	// Groups are the machine IDs (1-based) of each group, in Algorithm 6.1's
	// order. With Strategy Mixed the last group is the ring.
	Groups [][]int
	// Strategy is Group or Mixed.
	Strategy string
}

// Plan runs Algorithm 6.1 (machine IDs 1-based):
//
//	g = ⌊N/m⌋; groups i = 0..g−1 hold m·i+1 … m·i+m;
//	if m ∤ N the remaining machines g·m+1 … N join the last group ("mixed").
func Plan(n, m int) (*Placement, error) {
	if m < 1 {
		return nil, fmt.Errorf("placement: m = %d replicas (must be at least 1)", m)
	}
	if n < m {
		return nil, fmt.Errorf("placement: N = %d machines cannot hold m = %d replicas on distinct machines (need N ≥ m)", n, m)
	}
	p := &Placement{N: n, M: m, Strategy: Group}
	g := n / m
	for i := 0; i < g; i++ {
		grp := make([]int, 0, m)
		for j := 1; j <= m; j++ {
			grp = append(grp, m*i+j)
		}
		p.Groups = append(p.Groups, grp)
	}
	if n%m != 0 {
		p.Strategy = Mixed
		last := len(p.Groups) - 1
		for j := g*m + 1; j <= n; j++ {
			p.Groups[last] = append(p.Groups[last], j)
		}
	}
	return p, nil
}

// isRing reports whether group gi is placed as a ring (the last group of a
// mixed placement); the other groups broadcast inside the group.
func (p *Placement) isRing(gi int) bool {
	return p.Strategy == Mixed && gi == len(p.Groups)-1
}

// Holders returns s_i for machine i (1-based): the m machines that store
// machine i's checkpoint, i itself first, then the machines it sends to in
// sending order. In a group of m the others of the group; in the ring the
// m−1 successors i+1, …, i+m−1 (mod the ring's size, in the ring's order).
func (p *Placement) Holders(i int) []int {
	for gi, grp := range p.Groups {
		for j, id := range grp {
			if id != i {
				continue
			}
			out := []int{i}
			if p.isRing(gi) {
				for s := 1; s < p.M; s++ {
					out = append(out, grp[(j+s)%len(grp)])
				}
			} else {
				// Everyone else in the group, starting with the next one so
				// that the first copies of a group's machines go to
				// different receivers.
				for s := 1; s < len(grp); s++ {
					out = append(out, grp[(j+s)%len(grp)])
				}
			}
			return out
		}
	}
	return nil
}

// Sends returns the machines i sends its checkpoint to (Holders without i).
func (p *Placement) Sends(i int) []int { return p.Holders(i)[1:] }

// Receives returns the machines whose checkpoints i stores (i excluded), in
// increasing order.
func (p *Placement) Receives(i int) []int {
	var out []int
	for j := 1; j <= p.N; j++ {
		if j == i {
			continue
		}
		for _, h := range p.Sends(j) {
			if h == i {
				out = append(out, j)
			}
		}
	}
	return out
}

// Sets returns every machine's holder set s_i as a sorted list, i = 1..N.
func (p *Placement) Sets() [][]int {
	out := make([][]int, p.N)
	for i := 1; i <= p.N; i++ {
		s := append([]int(nil), p.Holders(i)...)
		sort.Ints(s)
		out[i-1] = s
	}
	return out
}

// UniqueSets is n = |unique{s_1..s_N}|: N/m for group placement, (p−1)+(m+q)
// for mixed (N = p·m + q).
func (p *Placement) UniqueSets() int { return len(uniqueSets(p.Sets())) }

// Ring returns the holder sets of the evaluation's ring baseline: machine
// i stores on i, i+1, …, i+m−1 (mod N).
func Ring(n, m int) [][]int {
	out := make([][]int, n)
	for i := 1; i <= n; i++ {
		s := make([]int, 0, m)
		for j := 0; j < m; j++ {
			s = append(s, (i-1+j)%n+1)
		}
		sort.Ints(s)
		out[i-1] = s
	}
	return out
}

// GroupOf returns the index in Groups of machine i's group.
func (p *Placement) GroupOf(i int) int {
	for gi, grp := range p.Groups {
		for _, id := range grp {
			if id == i {
				return gi
			}
		}
	}
	return -1
}

// uniqueSets returns the distinct sets of sets (each sorted), in first-seen
// order.
func uniqueSets(sets [][]int) [][]int {
	seen := map[string]bool{}
	var out [][]int
	for _, s := range sets {
		k := fmt.Sprint(s)
		if !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	return out
}
