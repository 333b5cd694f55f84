package main

import (
	"bytes"
	"testing"

	"trainwire.dev/lib/wire"
)

// FuzzAllToAllJob feeds arbitrary streams to the pairing of split sizes
// and rows that `hashsync alltoall` does: it must refuse what does not
// make an alltoall, never panic, and what it accepts must cut the rows
// exactly.
func FuzzAllToAllJob(f *testing.F) {
	var seed bytes.Buffer
	w := wire.NewWriter(&seed, "fuzz")
	_ = w.Write(i64Frame("x.splits", 1, 0, 2))
	_ = w.Write(wire.NewDenseF32("x", []float32{1, 2, 3, 4, 5, 6}, 3, 2))
	_ = w.Close()
	f.Add(seed.Bytes(), 3)
	f.Fuzz(func(t *testing.T, b []byte, world int) {
		if world < 1 || world > 16 {
			return
		}
		rd := wire.NewReader(bytes.NewReader(b), wire.Limits{MaxPayload: 1 << 16, MaxElems: 1 << 10})
		var pending *wire.Dense
		for range 8 {
			fr, err := rd.Next()
			if err != nil {
				return
			}
			d, ok := fr.(*wire.Dense)
			if !ok {
				continue
			}
			if pending == nil {
				pending = d
				continue
			}
			j, err := newJob(pending, d, world)
			pending = nil
			if err != nil {
				continue
			}
			var rows int64
			for _, s := range j.splits {
				if s < 0 {
					t.Fatalf("accepted a negative split %d", s)
				}
				rows += s
			}
			if rows*int64(j.rowBytes) != int64(len(d.Data)) || len(j.splits) != world {
				t.Fatalf("accepted splits %v of %d-byte rows for %d bytes in a world of %d", j.splits, j.rowBytes, len(d.Data), world)
			}
		}
	})
}
