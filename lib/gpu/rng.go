package gpu

import "trainwire.dev/lib/rng"

// below returns a uniform integer in [0, n) from the stream key starting at
// draw 0, as lib/codec's window draws do on a fresh sequence.
func below(key uint64, n uint64) uint64 {
	s := rng.Seq{Key: key}
	return s.Below(n)
}
