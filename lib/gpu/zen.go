package gpu

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"trainwire.dev/lib/zen"
)

// Zen (Wang et al., "sparsity-driven data synchronization"; the hashsync
// tool): hierarchical hashing of a gradient's non-zero indices into one
// partition per server, and the hash bitmap of the pull. The conventions
// are hashsync's (lib/zen), so hashsync's --device gpu
// can use these functions and get the same partitions:
//
//   - h_s(idx) = zen.MM3(idx, Seeds[s]) (MurmurHash3_x86_32 of the 4 LE bytes),
//     reduce(h, n) = (h·n) >> 32 (Lemire's multiply-shift);
//   - the partition of idx is reduce(h_0(idx), N), the same on every rank;
//   - its slot in the partition's parallel memory is reduce(h_s(idx), r1)
//     for s = 1..k (atomicCAS), then the partition's serial memory (r2
//     slots, atomic counter), then an overflow list: nothing is ever lost;
//   - r1 = max(1, ceil(C·m/N)), r2 = max(1, ceil(R2·r1)) for m indices;
//   - slots hold the index's position in the input list + 1, so the output
//     is positions per part (ZenParts, as hashsync's zen.Parts);
//   - bitmaps are LSB-first: bit t is bit t%8 of byte t/8.
//
// The CPU references (ZenHashCPU, ZenPartitionCPU, HashBitmapEncodeCPU,
// HashBitmapDecodeCPU) define the semantics the device functions reproduce.

// ZenConfig parametrises the hash partition (hashsync's zen.HashConfig;
// defaults from the paper: C = 2, R2 = 0.1, k = len(Seeds)−1 = 3).
type ZenConfig struct {
	// N is the number of partitions (servers).
	N int
	// Seeds: Seeds[0] for h0 (the same on every rank), Seeds[1..k] for the
	// slot hashes; nil means ZenSeeds(0, 3).
	Seeds []uint32
	// C sets the parallel memory: r1 = ceil(C·m/N) slots per partition.
	C float64
	// R2 is the serial memory as a fraction of r1: r2 = ceil(R2·r1).
	R2 float64
}

// ZenSeeds returns k+1 seeds base+43+s (zen.DefaultSeeds; 43+s as the
// authors' DRAGONN kernels).
func ZenSeeds(base uint32, k int) []uint32 { return zen.DefaultSeeds(base, k) }

func (c ZenConfig) withDefaults() (ZenConfig, error) {
	if c.C == 0 {
		c.C = 2
	}
	if c.R2 == 0 {
		c.R2 = 0.1
	}
	if c.Seeds == nil {
		c.Seeds = ZenSeeds(0, 3)
	}
	switch {
	case c.N < 1:
		return c, fmt.Errorf("gpu: zen: %d partitions", c.N)
	case len(c.Seeds) < 2 || len(c.Seeds) > 17:
		return c, fmt.Errorf("gpu: zen: %d seeds (want h0 and 1 to 16 slot hashes)", len(c.Seeds))
	case !(c.C > 0) || !(c.R2 > 0) || math.IsInf(c.C, 0) || math.IsInf(c.R2, 0):
		return c, fmt.Errorf("gpu: zen: memory factors must be positive (c=%g, r2=%g)", c.C, c.R2)
	}
	return c, nil
}

// Sizes returns r1 and r2 for m indices.
func (c ZenConfig) Sizes(m int) (r1, r2 int64) {
	r1 = max(1, int64(math.Ceil(c.C*float64(m)/float64(c.N))))
	r2 = max(1, int64(math.Ceil(c.R2*float64(r1))))
	return
}

// PartitionOf returns the partition of idx.
func (c ZenConfig) PartitionOf(idx uint32) int {
	return zen.H0(idx, c.Seeds[0], c.N)
}

// ZenParts is a partition of an index list into N parts: part j is
// Pos[Off[j]:Off[j+1]], positions into the list (hashsync's zen.Parts).
type ZenParts struct {
	Off []int
	Pos []int32
	// Serial counts the indices that went to serial memory after k failed
	// CAS, Overflow those past the serial memory (kept, in a list).
	Serial, Overflow int
}

// Part returns the positions of part j.
func (p *ZenParts) Part(j int) []int32 { return p.Pos[p.Off[j]:p.Off[j+1]] }

// Sort orders every part by position, the canonical order (the hash
// memory's own order depends on which thread wins each CAS).
func (p *ZenParts) Sort() {
	for j := 0; j+1 < len(p.Off); j++ {
		slices.Sort(p.Part(j))
	}
}

// ZenHashCPU is the reference partition of idx (unique indices): every
// position in part PartitionOf(idx[pos]), ascending.
func ZenHashCPU(idx []uint32, cfg ZenConfig) (*ZenParts, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	off := make([]int, cfg.N+1)
	for _, v := range idx {
		off[cfg.PartitionOf(v)+1]++
	}
	for j := 0; j < cfg.N; j++ {
		off[j+1] += off[j]
	}
	at := slices.Clone(off[:cfg.N])
	pos := make([]int32, len(idx))
	for i, v := range idx {
		p := cfg.PartitionOf(v)
		pos[at[p]] = int32(i)
		at[p]++
	}
	return &ZenParts{Off: off, Pos: pos}, nil
}

// Partitioned is a dense gradient's non-zeros by partition: indices and
// the gradient's values there.
type Partitioned struct {
	Idx  [][]uint32
	Vals [][]float32
	// Serial and Overflow as in ZenParts.
	Serial, Overflow int
}

// ZenPartitionCPU is the reference: the non-zeros of g (x != ±0) by
// partition, in ascending index order.
func ZenPartitionCPU(g []float32, cfg ZenConfig) (*Partitioned, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	out := &Partitioned{Idx: make([][]uint32, cfg.N), Vals: make([][]float32, cfg.N)}
	for j := range out.Idx {
		out.Idx[j], out.Vals[j] = []uint32{}, []float32{}
	}
	for i, v := range g {
		if math.Float32bits(v)&0x7fffffff != 0 {
			p := cfg.PartitionOf(uint32(i))
			out.Idx[p] = append(out.Idx[p], uint32(i))
			out.Vals[p] = append(out.Vals[p], v)
		}
	}
	return out, nil
}

// ZenTables returns the sorted index set of every partition over a tensor
// of size elements (or rows): table j = {idx < size : PartitionOf(idx) =
// j}, the 𝕀_j of the hash bitmap. Two passes; 4·size bytes in all.
func ZenTables(size uint32, cfg ZenConfig) ([][]uint32, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cnt := make([]int, cfg.N)
	for i := uint32(0); i < size; i++ {
		cnt[cfg.PartitionOf(i)]++
	}
	out := make([][]uint32, cfg.N)
	for j := range out {
		out[j] = make([]uint32, 0, cnt[j])
	}
	for i := uint32(0); i < size; i++ {
		p := cfg.PartitionOf(i)
		out[p] = append(out[p], i)
	}
	return out, nil
}

// HashBitmapEncodeCPU encodes a partition's aggregate acc (one value per
// entry of its table 𝕀_j): bit t (LSB first: bit t%8 of byte t/8) is set
// iff acc[t] != ±0, and vals are those acc[t] in ascending t.
func HashBitmapEncodeCPU(acc []float32) (bitmap []byte, vals []float32) {
	bitmap = make([]byte, (len(acc)+7)/8)
	vals = []float32{}
	for t, v := range acc {
		if math.Float32bits(v)&0x7fffffff != 0 {
			bitmap[t/8] |= 1 << (t % 8)
			vals = append(vals, v)
		}
	}
	return
}

// checkBitmap validates a hash bitmap of nbits bits against its values.
func checkBitmap(nbits int, bitmap []byte, nvals int) error {
	if len(bitmap) != (nbits+7)/8 {
		return fmt.Errorf("hash bitmap: %d bytes for %d entries, want %d", len(bitmap), nbits, (nbits+7)/8)
	}
	if r := nbits % 8; r != 0 && bitmap[len(bitmap)-1]>>r != 0 {
		return fmt.Errorf("hash bitmap: padding bits past entry %d are set", nbits)
	}
	ones := 0
	for _, b := range bitmap {
		ones += bits.OnesCount8(b)
	}
	if ones != nvals {
		return fmt.Errorf("hash bitmap: %d bits set, %d values", ones, nvals)
	}
	return nil
}

// HashBitmapDecodeCPU decodes a hash bitmap over table (𝕀_j): it returns
// the global indices table[t] of the set bits in ascending t and, when out
// is not nil, adds vals into out at them.
func HashBitmapDecodeCPU(table []uint32, bitmap []byte, vals []float32, out []float32) ([]uint32, error) {
	if err := checkBitmap(len(table), bitmap, len(vals)); err != nil {
		return nil, err
	}
	idx := make([]uint32, 0, len(vals))
	for by, b := range bitmap {
		for b != 0 {
			q := bits.TrailingZeros8(b)
			b &= b - 1
			id := table[8*by+q]
			if out != nil {
				if int(id) >= len(out) {
					return nil, fmt.Errorf("hash bitmap: index %d beyond the output's %d elements", id, len(out))
				}
				out[id] += vals[len(idx)]
			}
			idx = append(idx, id)
		}
	}
	return idx, nil
}

// ZenHash partitions idx (unique indices, each < 2^32−1) on the device
// with Algorithm 1 (atomicCAS, serial memory, overflow list) and extracts
// the hash memory by an ordered compaction. Each part holds exactly
// ZenHashCPU's positions, in hash-memory order (Sort makes it canonical).
func (d *Device) ZenHash(idx []uint32, cfg ZenConfig) (*ZenParts, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if int64(len(idx)) >= math.MaxUint32 {
		return nil, fmt.Errorf("gpu: zen: %d indices (at most 2^32-2)", len(idx))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m := int64(len(idx))
	ip, err := d.scratchBuf("zen.idx", 4*m)
	if err != nil {
		return nil, err
	}
	if err := d.htod(ip, u32b(idx)); err != nil {
		return nil, err
	}
	return d.zenHash(ip, m, cfg)
}

// zenHash runs the hash partition of the m indices at ip (d.mu held).
func (d *Device) zenHash(ip dptr, m int64, cfg ZenConfig) (*ZenParts, error) {
	r1, r2 := cfg.Sizes(int(m))
	P := int64(cfg.N)
	slots := P * (r1 + r2)
	table, err := d.scratchBuf("zen.table", 4*slots)
	if err != nil {
		return nil, err
	}
	// counters: serial[P], stored[P], novf
	ctr, err := d.scratchBuf("zen.ctr", 4*(2*P+1))
	if err != nil {
		return nil, err
	}
	seeds, err := d.scratchBuf("zen.seeds", 4*int64(len(cfg.Seeds)))
	if err != nil {
		return nil, err
	}
	ovf, err := d.scratchBuf("zen.ovf", 4*m)
	if err != nil {
		return nil, err
	}
	if err := d.be.memset0(table, 4*slots); err != nil {
		return nil, err
	}
	if err := d.be.memset0(ctr, 4*(2*P+1)); err != nil {
		return nil, err
	}
	if err := d.htod(seeds, u32b(cfg.Seeds)); err != nil {
		return nil, err
	}
	if err := d.launch("tw_zen_hash", m, blockThreads, ip, uint64(m), table, uint64(P), uint64(r1), uint64(r2),
		uint64(len(cfg.Seeds)-1), seeds, ctr, ctr+dptr(4*P), ovf, ctr+dptr(8*P)); err != nil {
		return nil, err
	}
	cb := make([]uint32, 2*P+1)
	if err := d.dtoh(u32b(cb), ctr); err != nil {
		return nil, err
	}
	out := &ZenParts{Off: make([]int, P+1), Pos: make([]int32, m)}
	for j := int64(0); j < P; j++ {
		out.Serial += int(cb[j])
	}
	novf := int64(cb[2*P])
	out.Overflow = int(novf)
	d.stats.ZenOverflw += novf
	// Extraction: ordered compaction of the hash memory; partitions are
	// contiguous rows, so the output is grouped by partition.
	tiles := (slots + selTile - 1) / selTile
	cnts, err := d.scratchBuf("zen.cnt", 4*tiles)
	if err != nil {
		return nil, err
	}
	if err := d.launchGrid("tw_u32nz_count", tiles, selT, table, uint64(slots), cnts); err != nil {
		return nil, err
	}
	hc := make([]uint32, tiles)
	if err := d.dtoh(u32b(hc), cnts); err != nil {
		return nil, err
	}
	offs := make([]uint64, tiles)
	var o uint64
	for t := range offs {
		offs[t] = o
		o += uint64(hc[t])
	}
	stored := int64(o)
	if stored+novf != m {
		return nil, fmt.Errorf("gpu: zen: %d stored + %d overflowed of %d indices", stored, novf, m)
	}
	offp, err := d.scratchBuf("zen.offs", 8*tiles)
	if err != nil {
		return nil, err
	}
	if err := d.htod(offp, u64b(offs)); err != nil {
		return nil, err
	}
	pp, err := d.scratchBuf("zen.pos", 4*m)
	if err != nil {
		return nil, err
	}
	if err := d.launchGrid("tw_u32nz_write", tiles, selT, table, uint64(slots), offp, pp); err != nil {
		return nil, err
	}
	hp := make([]uint32, stored)
	if err := d.dtoh(u32b(hp), pp); err != nil {
		return nil, err
	}
	ov := make([]uint32, novf)
	if err := d.dtoh(u32b(ov), ovf); err != nil {
		return nil, err
	}
	// Overflowed positions join their partitions after the stored ones.
	ovByPart := make([][]int32, P)
	if novf > 0 {
		idx := make([]uint32, m)
		if err := d.dtoh(u32b(idx), d.scratch["zen.idx"].p); err != nil {
			return nil, err
		}
		for _, pos := range ov {
			p := cfg.PartitionOf(idx[pos])
			ovByPart[p] = append(ovByPart[p], int32(pos))
		}
	}
	var at, w int
	for j := int64(0); j < P; j++ {
		out.Off[j] = w
		c := int(cb[P+j])
		for _, pos := range hp[at : at+c] {
			out.Pos[w] = int32(pos)
			w++
		}
		at += c
		w += copy(out.Pos[w:], ovByPart[j])
	}
	out.Off[P] = w
	return out, nil
}

// ZenPartition hashes the non-zeros (x != ±0) of a dense gradient on the
// device: the non-zeros are selected on the device (ascending), hashed by
// ZenHash, and returned with their values per partition, in hash-memory
// order (Sort for the canonical one). It holds ZenPartitionCPU's pairs.
func (d *Device) ZenPartition(g []float32, cfg ZenConfig) (*Partitioned, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if int64(len(g)) >= math.MaxUint32 {
		return nil, fmt.Errorf("gpu: zen: %d elements (at most 2^32-2)", len(g))
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	n := int64(len(g))
	x, err := d.scratchBuf("x", 4*n)
	if err != nil {
		return nil, err
	}
	if err := d.htod(x, f32b(g)); err != nil {
		return nil, err
	}
	s, err := d.selCount(x, n, 1, 1) // keys >= 1: the non-zeros
	if err != nil {
		return nil, err
	}
	m := s.always
	ip, err := d.scratchBuf("zen.idx", 4*m)
	if err != nil {
		return nil, err
	}
	if _, err := d.selWrite(s, 0, 0, 0, ip); err != nil {
		return nil, err
	}
	parts, err := d.zenHash(ip, m, cfg)
	if err != nil {
		return nil, err
	}
	nz := make([]uint32, m)
	if err := d.dtoh(u32b(nz), ip); err != nil {
		return nil, err
	}
	out := &Partitioned{Idx: make([][]uint32, cfg.N), Vals: make([][]float32, cfg.N), Serial: parts.Serial, Overflow: parts.Overflow}
	for j := range out.Idx {
		ps := parts.Part(j)
		out.Idx[j], out.Vals[j] = make([]uint32, len(ps)), make([]float32, len(ps))
		for q, pos := range ps {
			out.Idx[j][q] = nz[pos]
			out.Vals[j][q] = g[nz[pos]]
		}
	}
	return out, nil
}

// Sort orders every partition by index.
func (p *Partitioned) Sort() {
	for j := range p.Idx {
		ord := make([]int, len(p.Idx[j]))
		for i := range ord {
			ord[i] = i
		}
		slices.SortFunc(ord, func(a, b int) int { return cmp.Compare(p.Idx[j][a], p.Idx[j][b]) })
		idx, vals := make([]uint32, len(ord)), make([]float32, len(ord))
		for i, o := range ord {
			idx[i], vals[i] = p.Idx[j][o], p.Vals[j][o]
		}
		p.Idx[j], p.Vals[j] = idx, vals
	}
}

// HashBitmapEncode is HashBitmapEncodeCPU on the device.
func (d *Device) HashBitmapEncode(acc []float32) (bitmap []byte, vals []float32, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := int64(len(acc))
	x, err := d.scratchBuf("x", 4*n)
	if err != nil {
		return nil, nil, err
	}
	if err := d.htod(x, f32b(acc)); err != nil {
		return nil, nil, err
	}
	nb := (n + 7) / 8
	bm, err := d.scratchBuf("zen.bitmap", nb)
	if err != nil {
		return nil, nil, err
	}
	if err := d.launch("tw_bitmap_pack", nb, blockThreads, x, bm, uint64(n)); err != nil {
		return nil, nil, err
	}
	s, err := d.selCount(x, n, 1, 1)
	if err != nil {
		return nil, nil, err
	}
	vp, err := d.scratchBuf("vals", 4*s.always)
	if err != nil {
		return nil, nil, err
	}
	if _, err := d.selWrite(s, 0, 0, vp, 0); err != nil {
		return nil, nil, err
	}
	bitmap = make([]byte, nb)
	vals = make([]float32, s.always)
	if err := d.dtoh(bitmap, bm); err != nil {
		return nil, nil, err
	}
	return bitmap, vals, d.dtoh(f32b(vals), vp)
}

// ZenTable is a partition's sorted index set (𝕀_j) uploaded to the
// device once, for HashBitmapDecode.
type ZenTable struct {
	buf buffer
	n   int64
	dev *Device
}

// UploadTable copies table (𝕀_j) to the device.
func (d *Device) UploadTable(table []uint32) (*ZenTable, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := int64(len(table))
	p, err := d.be.alloc(max(4*n, 8))
	if err != nil {
		return nil, err
	}
	if err := d.htod(p, u32b(table)); err != nil {
		d.be.free(p)
		return nil, err
	}
	return &ZenTable{buf: buffer{p, max(4*n, 8)}, n: n, dev: d}, nil
}

// Free releases the table's device memory.
func (t *ZenTable) Free() {
	t.dev.mu.Lock()
	defer t.dev.mu.Unlock()
	t.dev.be.free(t.buf.p)
}

// HashBitmapDecode is HashBitmapDecodeCPU on the device: the global
// indices of the set bits, ascending, with vals added into out (a dense
// host tensor, updated in place) when out is not nil.
func (d *Device) HashBitmapDecode(t *ZenTable, bitmap []byte, vals []float32, out []float32) ([]uint32, error) {
	if err := checkBitmap(int(t.n), bitmap, len(vals)); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	nb := int64(len(bitmap))
	k := int64(len(vals))
	bm, err := d.scratchBuf("zen.bitmap", nb)
	if err != nil {
		return nil, err
	}
	vp, err := d.scratchBuf("vals", 4*k)
	if err != nil {
		return nil, err
	}
	ip, err := d.scratchBuf("idx", 4*k)
	if err != nil {
		return nil, err
	}
	if err := d.htod(bm, bitmap); err != nil {
		return nil, err
	}
	if err := d.htod(vp, f32b(vals)); err != nil {
		return nil, err
	}
	var op dptr
	if out != nil {
		if op, err = d.scratchBuf("x", 4*int64(len(out))); err != nil {
			return nil, err
		}
		if err := d.htod(op, f32b(out)); err != nil {
			return nil, err
		}
	}
	tiles := (nb + selT*4 - 1) / (selT * 4)
	cnts, err := d.scratchBuf("zen.cnt", 4*max(tiles, 1))
	if err != nil {
		return nil, err
	}
	if err := d.launchGrid("tw_bitmap_count", tiles, selT, bm, uint64(nb), cnts); err != nil {
		return nil, err
	}
	hc := make([]byte, 4*tiles)
	if err := d.dtoh(hc, cnts); err != nil {
		return nil, err
	}
	offs := make([]byte, 8*tiles)
	var o uint64
	for i := int64(0); i < tiles; i++ {
		binary.LittleEndian.PutUint64(offs[8*i:], o)
		o += uint64(binary.LittleEndian.Uint32(hc[4*i:]))
	}
	offp, err := d.scratchBuf("zen.offs", 8*max(tiles, 1))
	if err != nil {
		return nil, err
	}
	if err := d.htod(offp, offs); err != nil {
		return nil, err
	}
	if err := d.launchGrid("tw_bitmap_decode", tiles, selT, bm, uint64(t.n), t.buf.p, offp, vp, ip, op); err != nil {
		return nil, err
	}
	idx := make([]uint32, k)
	if err := d.dtoh(u32b(idx), ip); err != nil {
		return nil, err
	}
	if out != nil {
		if err := d.dtoh(f32b(out), op); err != nil {
			return nil, err
		}
	}
	return idx, nil
}
