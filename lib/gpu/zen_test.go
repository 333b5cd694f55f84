package gpu

import (
	"bytes"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"trainwire.dev/lib/zen"
)

// TestMM3Vectors: the spec's MurmurHash3_x86_32 vectors (SMHasher values).
func TestMM3Vectors(t *testing.T) {
	for _, c := range []struct{ key, seed, want uint32 }{
		{0, 0, 0x2362F9DE}, {1, 0, 0xFBF1402A}, {2, 0, 0x40B23B7F}, {1000, 0, 0xFFCA7F79},
		{0xFFFFFFFF, 0, 0x76293B50}, {1, 1, 0x5E11E574}, {1, 42, 0xDEA578E3},
	} {
		if got := zen.MM3(c.key, c.seed); got != c.want {
			t.Errorf("zen.MM3(%d, %d) = %#x, want %#x", c.key, c.seed, got, c.want)
		}
	}
}

// sparseGrad is a gradient of density rho with skewed non-zeros (every
// 7th block of 100 dense, the rest sparse), some of them −0 (a zero).
func sparseGrad(n int, rho float64, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 3))
	g := make([]float32, n)
	for i := range g {
		if (i/100)%7 == 0 || r.Float64() < rho {
			g[i] = float32(r.NormFloat64())
		}
		if i%1009 == 0 {
			g[i] = float32(math.Copysign(0, -1))
		}
	}
	return g
}

// TestZenPartition: the device's hash partition (CAS, serial memory,
// overflow list) holds exactly the CPU reference's (index, value) pairs per
// partition — the spec's R2 "no information loss" — with the paper's
// memory, and with memory so small that serial writes and the overflow
// list are forced.
func TestZenPartition(t *testing.T) {
	for _, dev := range testDevices(t) {
		for _, c := range []struct {
			n, parts, k int
			r1f         float64
			wantSerial  bool
			wantOvf     bool
		}{
			{0, 4, 3, 2, false, false},
			{1, 1, 3, 2, false, false},
			{50000, 4, 3, 2, true, false},
			{50000, 16, 1, 2, true, true}, // k = 1: ~21% serial > R2 = R1/10
			{50000, 3, 2, 0.3, true, true},
			{200003, 7, 4, 1, true, true}, // c = 1 overflows (spec §3.5)
		} {
			g := sparseGrad(c.n, 0.05, uint64(c.n+c.parts))
			cfg := ZenConfig{N: c.parts, C: c.r1f, Seeds: ZenSeeds(99, c.k)}
			want, err := ZenPartitionCPU(g, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dev.ZenPartition(g, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got.Sort()
			for j := range want.Idx {
				if !slices.Equal(want.Idx[j], got.Idx[j]) || !bytes.Equal(f32b(want.Vals[j]), f32b(got.Vals[j])) {
					t.Fatalf("%s %+v: partition %d differs: %d vs %d indices", dev.Name(), c, j, len(want.Idx[j]), len(got.Idx[j]))
				}
			}
			if c.wantSerial && got.Serial == 0 {
				t.Errorf("%+v: no serial writes", c)
			}
			if c.wantOvf != (got.Overflow > 0) {
				t.Errorf("%+v: overflow %d", c, got.Overflow)
			}
		}
	}
}

// TestZenHash: the device's partition of an index list (positions, as
// hashsync's zen.Parts) equals the CPU reference's per part, for random
// unique indices of any magnitude, with and without serial/overflow.
func TestZenHash(t *testing.T) {
	for _, dev := range testDevices(t) {
		r := rand.New(rand.NewPCG(5, 5))
		for _, c := range []struct {
			m, n int
			cfg  ZenConfig
		}{
			{0, 3, ZenConfig{}},
			{1, 1, ZenConfig{}},
			{30000, 16, ZenConfig{}},
			{30000, 4, ZenConfig{C: 0.5, R2: 0.05, Seeds: ZenSeeds(7, 1)}},
			{100000, 8, ZenConfig{Seeds: ZenSeeds(1, 4)}},
		} {
			seen := map[uint32]bool{}
			idx := make([]uint32, 0, c.m)
			for len(idx) < c.m {
				v := r.Uint32() >> uint(r.IntN(20))
				if v != math.MaxUint32 && !seen[v] {
					seen[v] = true
					idx = append(idx, v)
				}
			}
			cfg := c.cfg
			cfg.N = c.n
			want, err := ZenHashCPU(idx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := dev.ZenHash(idx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got.Sort()
			if !slices.Equal(want.Off, got.Off) || !slices.Equal(want.Pos, got.Pos) {
				t.Fatalf("%s m=%d n=%d %+v: parts differ", dev.Name(), c.m, c.n, c.cfg)
			}
			if c.cfg.C == 0.5 && got.Overflow == 0 {
				t.Errorf("C=0.5: no overflow")
			}
		}
		if _, err := dev.ZenHash([]uint32{1}, ZenConfig{N: 0}); err == nil {
			t.Error("N = 0 accepted")
		}
	}
}

// TestHashBitmap: encode and decode match the CPU reference, Fig. 10's toy
// case decodes, and a whole Zen push/aggregate/pull round reproduces the
// dense sum bit for bit (spec R1), for every device.
func TestHashBitmap(t *testing.T) {
	for _, dev := range testDevices(t) {
		// Fig. 10 (0-based): 𝕀_0 = {1, 5, 7, 9}; the aggregate is non-zero at
		// entries 1 and 2, i.e. global indices 5 and 7.
		tab, _ := dev.UploadTable([]uint32{1, 5, 7, 9})
		bm, vals, err := dev.HashBitmapEncode([]float32{0, 2, 3, 0})
		if err != nil || !bytes.Equal(bm, []byte{0b0110}) || !slices.Equal(vals, []float32{2, 3}) {
			t.Fatalf("toy encode: %08b %v %v", bm, vals, err)
		}
		idx, err := dev.HashBitmapDecode(tab, bm, vals, nil)
		if err != nil || !slices.Equal(idx, []uint32{5, 7}) {
			t.Fatalf("toy decode: %v %v", idx, err)
		}
		tab.Free()

		const n, workers = 100003, 3
		cfg := ZenConfig{N: 5, Seeds: ZenSeeds(1, 3)}
		tables, err := ZenTables(n, cfg)
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for _, tb := range tables {
			total += len(tb)
		}
		if total != n { // Theorem B.3: the bitmaps cover |G| bits in all
			t.Fatalf("tables cover %d of %d", total, n)
		}
		rank := make([]uint32, n)
		for _, tb := range tables {
			for r, id := range tb {
				rank[id] = uint32(r)
			}
		}
		grads := make([][]float32, workers)
		ref := make([]float32, n)
		for w := range grads {
			grads[w] = sparseGrad(n, 0.02, uint64(10+w))
			for i, v := range grads[w] {
				ref[i] += v
			}
		}
		// Push: each worker partitions; server j adds in worker order.
		acc := make([][]float32, cfg.N)
		for j := range acc {
			acc[j] = make([]float32, len(tables[j]))
		}
		for w := range grads {
			p, err := dev.ZenPartition(grads[w], cfg)
			if err != nil {
				t.Fatal(err)
			}
			for j := range p.Idx {
				for q, id := range p.Idx[j] {
					if cfg.PartitionOf(id) != j {
						t.Fatalf("index %d in partition %d, h0 says %d", id, j, cfg.PartitionOf(id))
					}
					acc[j][rank[id]] += p.Vals[j][q]
				}
			}
		}
		// Pull: server j's hash bitmap; every worker decodes all of them.
		out := make([]float32, n)
		outCPU := make([]float32, n)
		for j := range acc {
			bm, vals, err := dev.HashBitmapEncode(acc[j])
			if err != nil {
				t.Fatal(err)
			}
			bmc, valsc := HashBitmapEncodeCPU(acc[j])
			if !bytes.Equal(bm, bmc) || !bytes.Equal(f32b(vals), f32b(valsc)) {
				t.Fatalf("partition %d: bitmap encode differs from the CPU", j)
			}
			tab, err := dev.UploadTable(tables[j])
			if err != nil {
				t.Fatal(err)
			}
			idx, err := dev.HashBitmapDecode(tab, bm, vals, out)
			if err != nil {
				t.Fatal(err)
			}
			idxc, err := HashBitmapDecodeCPU(tables[j], bm, vals, outCPU)
			if err != nil || !slices.Equal(idx, idxc) {
				t.Fatalf("partition %d: decode differs from the CPU (%v)", j, err)
			}
			tab.Free()
		}
		for i := range ref {
			if out[i] != ref[i] || outCPU[i] != ref[i] {
				t.Fatalf("%s: element %d: pull gives %v (cpu %v), dense sum %v", dev.Name(), i, out[i], outCPU[i], ref[i])
			}
		}
	}
}

// TestHashBitmapRejects: bad bitmaps are errors naming the problem.
func TestHashBitmapRejects(t *testing.T) {
	dev := newDevice(newEmu(2))
	tab, _ := dev.UploadTable([]uint32{3, 4, 8})
	for _, c := range []struct {
		bm   []byte
		vals []float32
	}{
		{[]byte{0b1000}, []float32{1}}, // padding bit
		{[]byte{0b011}, []float32{1}},  // 2 bits, 1 value
		{[]byte{0b1, 0}, []float32{1}}, // too long
		{[]byte{}, nil},                // too short
	} {
		if _, err := dev.HashBitmapDecode(tab, c.bm, c.vals, nil); err == nil {
			t.Errorf("%08b %v accepted", c.bm, c.vals)
		}
	}
}

// FuzzHashBitmapDecode: the device decoder (emulated) and the CPU
// reference agree on every input, accept or reject alike, and never
// panic.
func FuzzHashBitmapDecode(f *testing.F) {
	f.Add([]byte{0b0110}, uint8(4), uint8(2))
	f.Add([]byte{0xff, 0x01}, uint8(9), uint8(9))
	dev := newDevice(newEmu(3))
	f.Fuzz(func(t *testing.T, bm []byte, nbits, nvals uint8) {
		table := make([]uint32, nbits)
		for i := range table {
			table[i] = uint32(3 * i)
		}
		vals := make([]float32, nvals)
		for i := range vals {
			vals[i] = float32(i + 1)
		}
		outG := make([]float32, 3*256)
		outC := make([]float32, 3*256)
		tab, _ := dev.UploadTable(table)
		defer tab.Free()
		gi, gerr := dev.HashBitmapDecode(tab, bm, vals, outG)
		ci, cerr := HashBitmapDecodeCPU(table, bm, vals, outC)
		if (gerr == nil) != (cerr == nil) {
			t.Fatalf("device %v, cpu %v", gerr, cerr)
		}
		if gerr == nil && (!slices.Equal(gi, ci) || !slices.Equal(outG, outC)) {
			t.Fatalf("device and cpu decode differ")
		}
	})
}
