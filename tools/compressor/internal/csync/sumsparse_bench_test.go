package csync

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"trainwire.dev/lib/wire"
)

// BenchmarkSumSparse sums 4 ranks' top-1 % frames of a 2.36 M-element
// tensor (ResNet-101's largest) into a fresh result, as allgatherAll does (a fresh buffer each time).
func BenchmarkSumSparse(b *testing.B) {
	const d, n = 2359296, 4
	r := rand.New(rand.NewPCG(1, 2))
	frames := make([]*wire.Compressed, n)
	for p := range frames {
		var idx, vals []byte
		for i := 0; i < d; i++ {
			if r.IntN(100) == 0 {
				idx = binary.LittleEndian.AppendUint32(idx, uint32(i))
				vals = binary.LittleEndian.AppendUint32(vals, math.Float32bits(float32(r.NormFloat64())))
			}
		}
		frames[p] = &wire.Compressed{Parts: []wire.Part{{Data: vals}, {Data: idx}}}
	}
	b.SetBytes(4 * d)
	for b.Loop() {
		acc := make([]float32, d)
		sumSparse(acc, frames)
	}
}
