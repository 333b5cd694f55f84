package placement

import (
	"bufio"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func readTable(t *testing.T, name string) [][]string {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		rows = append(rows, strings.Fields(l))
	}
	return rows
}

func atoi(t *testing.T, s string) int {
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func near(t *testing.T, what string, got float64, want string) {
	t.Helper()
	if want == "-" {
		return
	}
	w, err := strconv.ParseFloat(want, 64)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(got-w) > 0.00005+1e-12 {
		t.Errorf("%s = %.6f, table says %s", what, got, want)
	}
}

// C-PL-1 / D.4.3: Algorithm 6.1's golden outputs.
func TestPlanGolden(t *testing.T) {
	for _, tc := range []struct {
		n, m     int
		groups   [][]int
		strategy string
		ring     map[int][]int
	}{
		{4, 2, [][]int{{1, 2}, {3, 4}}, Group, nil},
		{5, 2, [][]int{{1, 2}, {3, 4, 5}}, Mixed, map[int][]int{3: {4}, 4: {5}, 5: {3}}},
		{7, 3, [][]int{{1, 2, 3}, {4, 5, 6, 7}}, Mixed, map[int][]int{4: {5, 6}, 5: {6, 7}, 6: {7, 4}, 7: {4, 5}}},
		{16, 2, [][]int{{1, 2}, {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}, {13, 14}, {15, 16}}, Group, nil},
	} {
		p, err := Plan(tc.n, tc.m)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p.Groups, tc.groups) || p.Strategy != tc.strategy {
			t.Errorf("Plan(%d,%d) = %v %s, want %v %s", tc.n, tc.m, p.Groups, p.Strategy, tc.groups, tc.strategy)
		}
		for i, want := range tc.ring {
			if got := p.Sends(i); !reflect.DeepEqual(got, want) {
				t.Errorf("Plan(%d,%d): machine %d sends to %v, want %v", tc.n, tc.m, i, got, want)
			}
		}
	}
	if _, err := Plan(3, 4); err == nil {
		t.Error("Plan(3,4) accepted N < m")
	}
	if _, err := Plan(3, 0); err == nil {
		t.Error("Plan(3,0) accepted m = 0")
	}
}

// C-PL-2: every machine keeps a local copy, sends exactly m−1 and receives
// exactly m−1, for all N ≤ 64, m ≤ 4; C-PL-3: the unique holder sets.
func TestBalanceAndUniqueSets(t *testing.T) {
	for m := 1; m <= 4; m++ {
		for n := m; n <= 64; n++ {
			p, err := Plan(n, m)
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i <= n; i++ {
				h := p.Holders(i)
				if h[0] != i {
					t.Fatalf("N=%d m=%d: machine %d's holders %v do not start with itself", n, m, i, h)
				}
				distinct := map[int]bool{}
				for _, x := range h {
					distinct[x] = true
				}
				if len(h) != m || len(distinct) != m {
					t.Fatalf("N=%d m=%d: machine %d has holders %v, want %d distinct", n, m, i, h, m)
				}
				if r := p.Receives(i); len(r) != m-1 {
					t.Fatalf("N=%d m=%d: machine %d receives from %v, want %d machines", n, m, i, r, m-1)
				}
			}
			want := n / m
			if n%m != 0 {
				pp, q := n/m, n%m
				want = (pp - 1) + (m + q)
			}
			if got := p.UniqueSets(); got != want {
				t.Errorf("N=%d m=%d: %d unique holder sets, want %d", n, m, got, want)
			}
		}
	}
}

// C-PL-4: D.4.1 — bound, exact inclusion–exclusion, enumeration of the
// group and ring placements, ring union bound.
func TestD41(t *testing.T) {
	for _, r := range readTable(t, "d41.txt") {
		n, m, k := atoi(t, r[0]), atoi(t, r[1]), atoi(t, r[2])
		near(t, "bound", Bound(n, m, k), r[3])
		ex, err := ExactGroup(n, m, k)
		if err != nil {
			t.Fatal(err)
		}
		near(t, "exact", ex, r[4])
		near(t, "ring union bound", RingUnionBound(n, m, k), r[6])
		if n <= MaxEnumerate {
			p, _ := Plan(n, m)
			ok, tot, err := Enumerate(n, k, p.Sets())
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(float64(ok)/float64(tot)-ex) > 1e-12 {
				t.Errorf("N=%d m=%d k=%d: enumeration %d/%d disagrees with inclusion–exclusion %.6f", n, m, k, ok, tot, ex)
			}
			ok, tot, _ = Enumerate(n, k, Ring(n, m))
			near(t, "exact ring", float64(ok)/float64(tot), r[5])
		}
	}
	// The thesis's numbers.
	if b := Bound(16, 2, 2); math.Abs(b-0.9333) > 5e-5 {
		t.Errorf("Pr(16,2,2) = %.4f, thesis 93.3%%", b)
	}
}

// Corollary 6.1: equality for m ≤ k < 2m, strict for k ≥ 2m (when the bound
// is positive or the exact value is).
func TestCorollaryShape(t *testing.T) {
	for _, m := range []int{2, 3, 4} {
		for n := m; n <= 40; n += m {
			for k := m; k <= n; k++ {
				ex, _ := ExactGroup(n, m, k)
				b := Bound(n, m, k)
				if k < 2*m && math.Abs(ex-b) > 1e-12 {
					t.Errorf("N=%d m=%d k=%d: exact %.12f ≠ bound %.12f (should be equal for k < 2m)", n, m, k, ex, b)
				}
				if ex+1e-12 < b {
					t.Errorf("N=%d m=%d k=%d: exact %.12f below the bound %.12f", n, m, k, ex, b)
				}
			}
		}
	}
}

// D.4.2: mixed placement at k = m.
func TestD42(t *testing.T) {
	for _, r := range readTable(t, "d42.txt") {
		n, m := atoi(t, r[0]), atoi(t, r[1])
		p, err := Plan(n, m)
		if err != nil {
			t.Fatal(err)
		}
		if p.Strategy != Mixed {
			t.Fatalf("N=%d m=%d is not mixed", n, m)
		}
		u := p.UniqueSets()
		if u != atoi(t, r[3]) {
			t.Errorf("N=%d m=%d: n = %d, table %s", n, m, u, r[3])
		}
		pm := AtM(n, m, u)
		near(t, "P(mixed)", pm, r[2])
		ok, tot, err := Enumerate(n, m, p.Sets())
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(float64(ok)/float64(tot)-pm) > 1e-12 {
			t.Errorf("N=%d m=%d: enumeration %d/%d ≠ 1−n/C(N,m) = %.6f", n, m, ok, tot, pm)
		}
		ub := UpperBound(n, m)
		near(t, "UB", ub, r[4])
		near(t, "gap", ub-pm, r[5])
		near(t, "gap bound", GapBound(n, m), r[6])
		if ub-pm > GapBound(n, m)+1e-12 {
			t.Errorf("N=%d m=%d: gap %.6f exceeds (2m−3)/C(N,m)", n, m, ub-pm)
		}
	}
}
