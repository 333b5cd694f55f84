package csync

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"trainwire.dev/lib/wire"
)

// TestSumSparse: the blocked sum of several ranks' frames gives the bits
// of adding them one after the other to zeros, into a buffer that held
// garbage, on a tensor of many blocks with indices shared between ranks,
// at block edges and at the ends.
func TestSumSparse(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, d := range []int{1, 1 << 14, 1<<14 + 1, 5<<14 + 77} {
		for n := 1; n <= 5; n++ {
			frames := make([]*wire.Compressed, n)
			for p := range frames {
				var idx, vals []byte
				for i := 0; i < d; i++ {
					edge := i%(1<<14) == 0 || i%(1<<14) == 1<<14-1 || i == d-1
					if edge || r.IntN(40) == 0 {
						idx = binary.LittleEndian.AppendUint32(idx, uint32(i))
						v := float32(r.NormFloat64()) * float32(math.Ldexp(1, r.IntN(40)-20))
						vals = binary.LittleEndian.AppendUint32(vals, math.Float32bits(v))
					}
				}
				frames[p] = &wire.Compressed{Parts: []wire.Part{{Data: vals}, {Data: idx}}}
			}
			want := make([]float32, d)
			for _, f := range frames {
				addSparse(want, f)
			}
			got := make([]float32, d)
			for i := range got {
				got[i] = float32(math.NaN())
			}
			sumSparse(got, frames)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("d=%d n=%d element %d: %v, one frame after the other %v", d, n, i, got[i], want[i])
				}
			}
		}
	}
}
