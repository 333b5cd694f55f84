package gpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"trainwire.dev/lib/codec"
	"unsafe"
)

// f32b views float32s as their little-endian bytes (amd64/arm64 hosts).
func f32b(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// flags returns a zeroed 16-byte scratch: a u32 flag at +0 and a u64
// counter at +8 (or a u32 max at +4).
func (d *Device) flags() (dptr, error) {
	p, err := d.scratchBuf("flags", 16)
	if err != nil {
		return 0, err
	}
	return p, d.be.memset0(p, 16)
}

func (d *Device) readFlag(p dptr) (bool, error) {
	var b [4]byte
	if err := d.dtoh(b[:], p); err != nil {
		return false, err
	}
	return binary.LittleEndian.Uint32(b[:]) != 0, nil
}

// maxKey returns whether x holds NaN/Inf and the largest magnitude key.
func (d *Device) maxKey(x dptr, n int64) (bad bool, m uint32, err error) {
	f, err := d.flags()
	if err != nil {
		return false, 0, err
	}
	grid := min((n+blockThreads-1)/blockThreads, histGrid) // a grid-stride kernel
	if err := d.launchGrid("tw_maxkey", grid, blockThreads, x, uint64(n), f+4, f); err != nil {
		return false, 0, err
	}
	var b [8]byte
	if err := d.dtoh(b[:], f); err != nil {
		return false, 0, err
	}
	return binary.LittleEndian.Uint32(b[:]) != 0, binary.LittleEndian.Uint32(b[4:]), nil
}

// signPack packs the sign bits of x into bits (nb bytes) and returns the
// NaN/Inf flag and the count of elements with a clear sign bit.
func (d *Device) signPack(x dptr, n int64, bits dptr, invert uint64) (bad bool, npos int64, err error) {
	f, err := d.flags()
	if err != nil {
		return false, 0, err
	}
	nb := (n + 7) / 8
	if err := d.launch("tw_sign_pack", nb, blockThreads, x, bits, uint64(n), invert, f, f+8); err != nil {
		return false, 0, err
	}
	var b [16]byte
	if err := d.dtoh(b[:], f); err != nil {
		return false, 0, err
	}
	return binary.LittleEndian.Uint32(b[:]) != 0, int64(binary.LittleEndian.Uint64(b[8:])), nil
}

// blockSums runs a one-warp-per-64Ki-block reduction kernel writing per
// float64s per block, and returns them.
func (d *Device) blockSums(kernel string, x dptr, n int64, per int, extra ...any) ([]float64, error) {
	nb := (n + rblock - 1) / rblock
	out, err := d.scratchBuf("bsums", 8*int64(per)*max(nb, 1))
	if err != nil {
		return nil, err
	}
	args := append([]any{x, uint64(n), out}, extra...)
	if err := d.launchGrid(kernel, nb, 32, args...); err != nil {
		return nil, err
	}
	b := make([]byte, 8*int64(per)*nb)
	if err := d.dtoh(b, out); err != nil {
		return nil, err
	}
	v := make([]float64, per*int(nb))
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return v, nil
}

// signSums returns Σx and Σ|x| in lib/codec's order (signBlocks).
func (d *Device) signSums(x dptr, n int64) (sum, sumAbs float64, err error) {
	v, err := d.blockSums("tw_sign_sums", x, n, 2)
	if err != nil {
		return 0, 0, err
	}
	for k := 0; k < len(v); k += 2 {
		sum += v[k]
		sumAbs += v[k+1]
	}
	return sum, sumAbs, nil
}

// sumSquares returns Σx² in lib/codec's order (blockReduce(sumSquares)).
func (d *Device) sumSquares(x dptr, n int64) (float64, error) {
	v, err := d.blockSums("tw_sumsq", x, n, 1)
	if err != nil {
		return 0, err
	}
	var s float64
	for _, b := range v {
		s += b
	}
	return s, nil
}

// selection is the per-tile class counts of a compaction (tw_sel_count).
type selection struct {
	x      dptr
	n      int64
	A, B   uint32
	counts []uint32 // 2 per tile: always, band
	always int64
	band   int64
}

func (d *Device) selCount(x dptr, n int64, A, B uint32) (*selection, error) {
	tiles := (n + selTile - 1) / selTile
	s := &selection{x: x, n: n, A: A, B: B, counts: make([]uint32, 2*tiles)}
	if tiles == 0 {
		return s, nil
	}
	c, err := d.scratchBuf("selcounts", 8*tiles)
	if err != nil {
		return nil, err
	}
	if err := d.launchGrid("tw_sel_count", tiles, selT, x, uint64(n), uint64(A), uint64(B), c); err != nil {
		return nil, err
	}
	b := make([]byte, 8*tiles)
	if err := d.dtoh(b, c); err != nil {
		return nil, err
	}
	for i := range s.counts {
		s.counts[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	for t := int64(0); t < tiles; t++ {
		s.always += int64(s.counts[2*t])
		s.band += int64(s.counts[2*t+1])
	}
	return s, nil
}

// write compacts the selection (all "always" elements and the band
// elements of band rank in [lo, hi)) into vals/idx (either may be 0) in
// index order, and returns how many it wrote.
func (d *Device) selWrite(s *selection, lo, hi uint64, vals, idx dptr) (int64, error) {
	tiles := int64(len(s.counts) / 2)
	if tiles == 0 {
		return 0, nil
	}
	offs := make([]byte, 16*tiles)
	var out, band uint64
	for t := int64(0); t < tiles; t++ {
		binary.LittleEndian.PutUint64(offs[16*t:], out)
		binary.LittleEndian.PutUint64(offs[16*t+8:], band)
		a, b := uint64(s.counts[2*t]), uint64(s.counts[2*t+1])
		bl, bh := max(band, lo), min(band+b, hi)
		out += a
		if bh > bl {
			out += bh - bl
		}
		band += b
	}
	o, err := d.scratchBuf("seloffs", 16*tiles)
	if err != nil {
		return 0, err
	}
	if err := d.htod(o, offs); err != nil {
		return 0, err
	}
	if err := d.launchGrid("tw_sel_write", tiles, selT, s.x, uint64(s.n), uint64(s.A), uint64(s.B), lo, hi, o, vals, idx); err != nil {
		return 0, err
	}
	return int64(out), nil
}

// topK writes the exact top-k of x (largest |x|, ties to the lowest
// index), ascending indices, into vals/idx: lib/codec's topk. A radix
// select over the 31-bit magnitude keys (11, 10, 10 bits) finds the k-th
// key; the compaction takes every larger key and the first ties.
func (d *Device) topK(x dptr, n, k int64, vals, idx dptr) error {
	if k <= 0 || n == 0 || k >= n {
		if bad, _, err := d.maxKey(x, n); err != nil {
			return err
		} else if bad {
			return errNonFinite{}
		}
	}
	if k <= 0 || n == 0 {
		return nil
	}
	if k >= n {
		s, err := d.selCount(x, n, 0, 0) // every key >= 0
		if err != nil {
			return err
		}
		_, err = d.selWrite(s, 0, 0, vals, idx)
		return err
	}
	hist, err := d.scratchBuf("hist", 4*2048)
	if err != nil {
		return err
	}
	var prefix, pmask uint32
	rem := k // elements still to take at or below the current prefix
	type pass struct{ shift, bits uint }
	for pi, ps := range []pass{{20, 11}, {10, 10}, {0, 10}} {
		nb := 1 << ps.bits
		if err := d.be.memset0(hist, int64(4*nb)); err != nil {
			return err
		}
		grid := min((n+blockThreads-1)/blockThreads, histGrid)
		if err := d.launchGrid("tw_hist", grid, blockThreads, x, uint64(n), hist, uint64(ps.shift), uint64(nb),
			uint64(pmask), uint64(prefix)); err != nil {
			return err
		}
		hb := make([]byte, 4*nb)
		if err := d.dtoh(hb, hist); err != nil {
			return err
		}
		h := func(j int) int64 { return int64(binary.LittleEndian.Uint32(hb[4*j:])) }
		if pi == 0 {
			for j := 0x7f800000 >> 20; j < nb; j++ {
				if h(j) != 0 {
					return errNonFinite{}
				}
			}
		}
		// bucket b: count(> b) < rem <= count(>= b)
		var above int64
		b := nb - 1
		for ; b >= 0; b-- {
			if above+h(b) >= rem {
				break
			}
			above += h(b)
		}
		if b < 0 {
			return fmt.Errorf("gpu: top-k radix select lost its bucket (k=%d)", k)
		}
		rem -= above
		prefix |= uint32(b) << ps.shift
		pmask |= uint32(nb-1) << ps.shift
	}
	kth := prefix
	s, err := d.selCount(x, n, kth+1, kth)
	if err != nil {
		return err
	}
	if s.always+rem != k || s.band < rem {
		return fmt.Errorf("gpu: top-k selection counted %d above and %d at the k-th key, want %d", s.always, s.band, k)
	}
	got, err := d.selWrite(s, 0, uint64(rem), vals, idx)
	if err == nil && got != k {
		err = fmt.Errorf("gpu: top-k wrote %d elements, want %d", got, k)
	}
	return err
}

// msTopK is lib/codec's MSTopK on the device (Algorithm 1 of Shi et al.
// with its two fixes): ā and u from one exact-order reduction, N
// threshold probes (device counts), then the compaction of ι1 and a
// window of the band starting at a draw of the stream key.
func (d *Device) msTopK(x dptr, n, k int64, N int, key uint64, vals, idx dptr) (probes int, err error) {
	if k <= 0 || n == 0 {
		return 0, nil
	}
	if k >= n {
		return 0, d.topK(x, n, n, vals, idx)
	}
	f, err := d.flags()
	if err != nil {
		return 0, err
	}
	sums, err := d.blockSums("tw_sumabs_max", x, n, 1, f+4, f)
	if err != nil {
		return 0, err
	}
	var fb [8]byte
	if err := d.dtoh(fb[:], f); err != nil {
		return 0, err
	}
	if binary.LittleEndian.Uint32(fb[:]) != 0 {
		return 0, errNonFinite{}
	}
	var sum float64
	for _, v := range sums {
		sum += v
	}
	mean := sum / float64(n)
	u := float64(math.Float32frombits(binary.LittleEndian.Uint32(fb[4:])))
	search := codec.NewThresholdSearch(mean, u, k, n)
	cnt, err := d.scratchBuf("count", 8)
	if err != nil {
		return 0, err
	}
	grid := min((n+blockThreads-1)/blockThreads, histGrid)
	for it := 0; it < N; it++ {
		probes++
		t := search.Probe()
		if err := d.be.memset0(cnt, 8); err != nil {
			return probes, err
		}
		if err := d.launchGrid("tw_count_ge", grid, blockThreads, x, uint64(n), uint64(codec.KeyCeil(t)), cnt); err != nil {
			return probes, err
		}
		var cb [8]byte
		if err := d.dtoh(cb[:], cnt); err != nil {
			return probes, err
		}
		nnz := int64(binary.LittleEndian.Uint64(cb[:]))
		if search.Record(nnz) {
			break
		}
	}
	s, err := d.selCount(x, n, codec.KeyCeil(search.Thres1), codec.KeyCeil(search.Thres2))
	if err != nil {
		return probes, err
	}
	need := k - s.always
	if need < 0 || s.band < need {
		return probes, fmt.Errorf("gpu: mstopk: %d above thres1 and %d in the band for k=%d", s.always, s.band, k)
	}
	start := below(key, uint64(s.band-need)+1)
	got, err := d.selWrite(s, start, start+uint64(need), vals, idx)
	if err == nil && got != k {
		err = fmt.Errorf("gpu: mstopk wrote %d elements, want %d", got, k)
	}
	return probes, err
}

// u32b views uint32s as their little-endian bytes.
func u32b(x []uint32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// u64b views uint64s as their little-endian bytes.
func u64b(x []uint64) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 8*len(x))
}
