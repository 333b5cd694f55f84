package gpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/zen"
)

// The device functions reproduce the CPU references of this package
// (emu_test.go, parity_test.go); these tests tie those references to
// lib/zen, the partitioner and hash bitmap hashsync runs on the CPU, so
// the GPU path of `hashsync sync` partitions and encodes exactly as its
// CPU path does.
func TestZenReferencesMatchLibZen(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{1, 3, 4, 16} {
		seeds := ZenSeeds(uint32(n), 3)
		set := map[uint32]bool{}
		for len(set) < 20_000 {
			set[rng.Uint32N(1<<22)] = true
		}
		idx := make([]uint32, 0, len(set))
		for k := range set {
			idx = append(idx, k)
		}
		got, err := ZenHashCPU(idx, ZenConfig{N: n, Seeds: seeds})
		require.NoError(t, err)
		var h zen.Hasher
		want, err := h.Hash(idx, zen.HashConfig{N: n, Seeds: seeds, C: 2, R2: 0.1})
		require.NoError(t, err)
		require.Equal(t, want.N(), len(got.Off)-1)
		for j := range n {
			a := slices.Clone(got.Part(j))
			b := slices.Clone(want.Part(j))
			slices.Sort(a)
			slices.Sort(b)
			require.Equal(t, b, a, "n=%d part %d", n, j)
		}

		// the per-server index sets 𝕀_j
		const rows = 100_003
		tabs, err := ZenTables(rows, ZenConfig{N: n, Seeds: seeds})
		require.NoError(t, err)
		tab := zen.NewTable(rows, n, seeds[0], 2)
		for j := range n {
			require.Equal(t, tab.Set(j), tabs[j], "n=%d table %d", n, j)
		}

		// the hash bitmap of one server's aggregate
		set0 := tab.Set(0)
		acc := make([]float32, len(set0))
		nz := map[uint32]bool{}
		for t := range acc {
			if rng.IntN(3) == 0 {
				acc[t] = rng.Float32() + 0.5
				nz[set0[t]] = true
			}
		}
		bm, _ := HashBitmapEncodeCPU(acc)
		require.Equal(t, zen.HashBitmapEncode(set0, func(i uint32) bool { return nz[i] }), bm, "n=%d bitmap", n)
	}
}
