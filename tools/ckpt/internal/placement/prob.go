package placement

import (
	"fmt"
	"math/big"
)

// MaxEnumerate is the largest N for which Enumerate walks every k-subset.
const MaxEnumerate = 22

func binom(n, k int) *big.Int {
	if k < 0 || n < 0 || k > n {
		return big.NewInt(0)
	}
	return new(big.Int).Binomial(int64(n), int64(k))
}

func ratFloat(r *big.Rat) float64 { f, _ := r.Float64(); return f }

// Bound is Corollary 6.1's lower bound on the probability of recovering
// from CPU memory when k of N machines fail at once under group placement
// (m | N): 1 if k < m, else max{0, 1 − N·C(N−m, k−m) / (m·C(N, k))}. It is
// exact for m ≤ k < 2m.
func Bound(n, m, k int) float64 {
	if k < m {
		return 1
	}
	num := new(big.Int).Mul(big.NewInt(int64(n)), binom(n-m, k-m))
	den := new(big.Int).Mul(big.NewInt(int64(m)), binom(n, k))
	r := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).SetFrac(num, den))
	if r.Sign() < 0 {
		return 0
	}
	return ratFloat(r)
}

// ExactGroup is the exact recovery probability of group placement (m | N,
// g = N/m groups) at k simultaneous failures, by inclusion–exclusion over
// the groups lost entirely:
//
//	Σ_{j=0}^{⌊k/m⌋} (−1)^j · C(g, j) · C(N − j·m, k − j·m) / C(N, k)
func ExactGroup(n, m, k int) (float64, error) {
	if n%m != 0 {
		return 0, fmt.Errorf("placement: the inclusion–exclusion formula is for group placement (m | N); %d ∤ %d", m, n)
	}
	if k < m {
		return 1, nil
	}
	g := n / m
	sum := new(big.Int)
	for j := 0; j <= k/m && j <= g; j++ {
		t := new(big.Int).Mul(binom(g, j), binom(n-j*m, k-j*m))
		if j%2 == 1 {
			sum.Sub(sum, t)
		} else {
			sum.Add(sum, t)
		}
	}
	return ratFloat(new(big.Rat).SetFrac(sum, binom(n, k))), nil
}

// RingUnionBound is the ring placement's union bound
// 1 − N·C(N−m, k−m)/C(N, k) (machine i stores on i … i+m−1 mod N), floored
// at 0; the thesis's "ring is 25.0% lower" compares against it.
func RingUnionBound(n, m, k int) float64 {
	if k < m {
		return 1
	}
	num := new(big.Int).Mul(big.NewInt(int64(n)), binom(n-m, k-m))
	r := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).SetFrac(num, binom(n, k)))
	if r.Sign() < 0 {
		return 0
	}
	return ratFloat(r)
}

// AtM is the exact recovery probability at k = m failures of any placement
// with n unique holder sets: 1 − n/C(N, m) (a failure set is fatal iff it
// equals one of the holder sets).
func AtM(n, m, unique int) float64 {
	return ratFloat(new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).SetFrac(big.NewInt(int64(unique)), binom(n, m))))
}

// UpperBound is Theorem 6.1's bound on any placement at k = m:
// 1 − ⌈N/m⌉/C(N, m).
func UpperBound(n, m int) float64 { return AtM(n, m, (n+m-1)/m) }

// GapBound is Theorem 6.1's bound (2m−3)/C(N, m) on mixed placement's gap
// to the optimum (the thesis writes "<"; it is "≤").
func GapBound(n, m int) float64 {
	return ratFloat(new(big.Rat).SetFrac(big.NewInt(int64(2*m-3)), binom(n, m)))
}

// Enumerate returns the exact fraction of k-subsets of the N machines whose
// failure leaves some machine with no surviving holder (sets are the holder
// sets s_i), as recoverable/total, by walking every k-subset. N must be at
// most MaxEnumerate.
func Enumerate(n, k int, sets [][]int) (recoverable, total int64, err error) {
	if n > MaxEnumerate {
		return 0, 0, fmt.Errorf("placement: enumeration is for N ≤ %d (C(N,k) subsets); N = %d", MaxEnumerate, n)
	}
	if k < 0 || k > n {
		return 0, 0, fmt.Errorf("placement: k = %d failures out of N = %d machines", k, n)
	}
	var masks []uint32
	for _, s := range uniqueSets(sets) {
		var m uint32
		for _, id := range s {
			m |= 1 << uint(id-1)
		}
		masks = append(masks, m)
	}
	if k == 0 {
		return 1, 1, nil
	}
	limit := uint32(1) << uint(n)
	for sub := uint32(1)<<uint(k) - 1; sub < limit; {
		total++
		ok := true
		for _, m := range masks {
			if sub&m == m {
				ok = false
				break
			}
		}
		if ok {
			recoverable++
		}
		// Gosper's hack: the next k-subset in increasing order.
		c := sub & -sub
		r := sub + c
		if r == 0 {
			break
		}
		sub = (((r ^ sub) >> 2) / c) | r
	}
	return recoverable, total, nil
}
