package gpu

import (
	"trainwire.dev/lib/rng"
	"trainwire.dev/lib/zen"

	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"sort"
	"sync"
	"unsafe"
)

// emu is a CPU emulator of the kernels in kernels/*.cu: each kernel below
// is a line-by-line Go transliteration of its CUDA C, run block by block
// and thread by thread (warp shuffles and block scans are spelled out in
// the same order the device performs them). Host-side code is shared with
// the CUDA backend, so the parity tests exercise exactly what runs on the
// GPU except the CUDA C's own translation, which the device tests cover.
type emu struct {
	allocs   map[dptr][]uint64
	next     dptr
	launches map[string]int
	rng      *rand.Rand // thread order of the kernels with atomics that race
}

func newEmu(seed uint64) *emu {
	return &emu{allocs: map[dptr][]uint64{}, next: 1 << 20, launches: map[string]int{}, rng: rand.New(rand.NewPCG(seed, 7))}
}

func (e *emu) name() string { return "emulator (CPU)" }

func (e *emu) alloc(n int64) (dptr, error) {
	w := make([]uint64, (n+7)/8+1)
	p := e.next
	e.allocs[p] = w
	e.next += dptr((len(w)*8 + 4095) &^ 4095)
	return p, nil
}

func (e *emu) free(p dptr) {
	if _, ok := e.allocs[p]; !ok {
		panic(fmt.Sprintf("emu: free of %#x, not an allocation", p))
	}
	delete(e.allocs, p)
}

// bytesAt returns the bytes of the allocation holding p, from p on.
func (e *emu) bytesAt(p dptr) []byte {
	for base, w := range e.allocs {
		sz := dptr(len(w) * 8)
		if p >= base && p < base+sz {
			b := unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
			return b[p-base:]
		}
	}
	panic(fmt.Sprintf("emu: address %#x is not allocated", p))
}

func (e *emu) htod(dst dptr, src []byte) error { copy(e.bytesAt(dst)[:len(src)], src); return nil }
func (e *emu) dtoh(dst []byte, src dptr) error { copy(dst, e.bytesAt(src)[:len(dst)]); return nil }
func (e *emu) dtod(dst, src dptr, n int64) error {
	copy(e.bytesAt(dst)[:n], e.bytesAt(src)[:n])
	return nil
}
func (e *emu) memset0(p dptr, n int64) error { clear(e.bytesAt(p)[:n]); return nil }
func (e *emu) sync() error                   { return nil }
func (e *emu) close() error                  { return nil }

func (e *emu) f32(p dptr) []float32 {
	b := e.bytesAt(p)
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}
func (e *emu) f64(p dptr) []float64 {
	b := e.bytesAt(p)
	return unsafe.Slice((*float64)(unsafe.Pointer(&b[0])), len(b)/8)
}
func (e *emu) u32(p dptr) []uint32 {
	b := e.bytesAt(p)
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}
func (e *emu) u64(p dptr) []uint64 {
	b := e.bytesAt(p)
	return unsafe.Slice((*uint64)(unsafe.Pointer(&b[0])), len(b)/8)
}
func (e *emu) u16(p dptr) []uint16 {
	b := e.bytesAt(p)
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

type kernelFn func(e *emu, grid, block int, a []any)

func (e *emu) launch(name string, grid, block, shared int, args ...any) error {
	k, ok := emuKernels[name]
	if !ok {
		return fmt.Errorf("emu: no kernel %q", name)
	}
	// The arguments must match the PTX signature: count and 64-bit types
	// (a dptr or uint64 for .u64, a float64 for .f64), so a launch that
	// passes here passes the same values on the GPU.
	sig, ok := emuSigs[name]
	if !ok {
		return fmt.Errorf("emu: kernel %q is not in the PTX", name)
	}
	if len(sig) != len(args) {
		return fmt.Errorf("emu: kernel %s takes %d parameters, launched with %d", name, len(sig), len(args))
	}
	for i, a := range args {
		switch a.(type) {
		case dptr, uint64:
			if sig[i] != ".u64" {
				return fmt.Errorf("emu: kernel %s: parameter %d is %s, given %T", name, i, sig[i], a)
			}
		case float64:
			if sig[i] != ".f64" {
				return fmt.Errorf("emu: kernel %s: parameter %d is %s, given %T", name, i, sig[i], a)
			}
		default:
			return fmt.Errorf("emu: kernel %s: argument %d is %T", name, i, a)
		}
	}
	e.launches[name]++
	emuLaunchedMu.Lock()
	emuLaunched[name] = true
	emuLaunchedMu.Unlock()
	k(e, grid, block, args)
	return nil
}

// argument helpers
func ap(a any) dptr           { return a.(dptr) }
func au(a any) uint64         { return a.(uint64) }
func ad(a any) float64        { return a.(float64) }
func f32arg(u uint64) float32 { return math.Float32frombits(uint32(u)) }

func magkey(v float32) uint32 { return math.Float32bits(v) & 0x7fffffff }
func expbad(u uint32) uint32  { return (u & 0x7f800000) + 0x00800000 }
func unit24(r uint64) float32 { return float32(uint32(r>>40)) * (1.0 / 16777216.0) }
func fabsf(v float32) float32 { return math.Float32frombits(math.Float32bits(v) & 0x7fffffff) }

// scanExcl is scan_excl/zscan_excl: the block's exclusive prefix sums.
func scanExcl(v []uint32) []uint32 {
	out := make([]uint32, len(v))
	var s uint32
	for t, x := range v {
		out[t] = s
		s += x
	}
	return out
}

var emuKernels = map[string]kernelFn{
	"tw_sign_pack": func(e *emu, grid, block int, a []any) {
		x, bitsB, n, invert := e.f32(ap(a[0])), e.bytesAt(ap(a[1])), au(a[2]), au(a[3])
		bad, npos := e.u32(ap(a[4])), e.u64(ap(a[5]))
		nbytes := (n + 7) / 8
		var badacc uint32
		var pos uint64
		for t := uint64(0); t < uint64(grid*block); t++ {
			if t >= nbytes {
				continue
			}
			var b uint32
			for j := uint64(0); j < 8; j++ {
				i := 8*t + j
				if i < n {
					u := math.Float32bits(x[i])
					badacc |= expbad(u)
					p := (u >> 31) ^ 1
					pos += uint64(p)
					if invert != 0 {
						p ^= 1
					}
					b |= p << (7 - j)
				}
			}
			bitsB[t] = byte(b)
		}
		npos[0] += pos
		if badacc&0x80000000 != 0 {
			bad[0] |= 1
		}
	},
	"tw_sign_sums": func(e *emu, grid, block int, a []any) {
		x, n, out := e.f32(ap(a[0])), au(a[1]), e.f64(ap(a[2]))
		for k := uint64(0); k < uint64(grid); k++ {
			lo := k * rblock
			hi := min(lo+rblock, n)
			ln := hi - lo
			ng := ln / 8
			xb := x[lo:]
			var sum, sumabs float64
			var s, ab [32]float32
			for g0 := uint64(0); g0 < ng; g0 += 32 {
				for lane := uint64(0); lane < 32; lane++ { // each lane: one group of 8
					s[lane], ab[lane] = 0, 0
					if g := g0 + lane; g < ng {
						v := xb[8*g : 8*g+8]
						s[lane] = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))
						ab[lane] = ((fabsf(v[0]) + fabsf(v[1])) + (fabsf(v[2]) + fabsf(v[3]))) +
							((fabsf(v[4]) + fabsf(v[5])) + (fabsf(v[6]) + fabsf(v[7])))
					}
				}
				cnt := min(32, ng-g0)
				for j := uint64(0); j < 32; j++ { // shuffles, in lane order
					if j < cnt {
						sum += float64(s[j])
						sumabs += float64(ab[j])
					}
				}
			}
			for i := 8 * ng; i < ln; i++ { // lane 0: the tail
				sum += float64(xb[i])
				sumabs += math.Abs(float64(xb[i]))
			}
			out[2*k], out[2*k+1] = sum, sumabs
		}
	},
	"tw_sumabs_max": func(e *emu, grid, block int, a []any) {
		x, n, out, maxkey, bad := e.f32(ap(a[0])), au(a[1]), e.f64(ap(a[2])), e.u32(ap(a[3])), e.u32(ap(a[4]))
		for k := uint64(0); k < uint64(grid); k++ {
			lo := k * rblock
			hi := min(lo+rblock, n)
			ln := hi - lo
			n4 := ln / 4
			xb := x[lo:]
			var A, B, C, D float64
			var m, badacc uint32
			var v [32][4]float32
			for g0 := uint64(0); g0 < n4; g0 += 32 {
				for lane := uint64(0); lane < 32; lane++ {
					v[lane] = [4]float32{}
					if g := g0 + lane; g < n4 {
						w := xb[4*g : 4*g+4]
						for q := range 4 {
							u := math.Float32bits(w[q])
							v[lane][q] = fabsf(w[q])
							badacc |= expbad(u)
							m = max(m, u&0x7fffffff)
						}
					}
				}
				cnt := min(32, n4-g0)
				for j := uint64(0); j < 32; j++ {
					if j < cnt {
						A += float64(v[j][0])
						B += float64(v[j][1])
						C += float64(v[j][2])
						D += float64(v[j][3])
					}
				}
			}
			for i := 4 * n4; i < ln; i++ {
				u := math.Float32bits(xb[i])
				badacc |= expbad(u)
				m = max(m, u&0x7fffffff)
				A += math.Abs(float64(xb[i]))
			}
			out[k] = (A + B) + (C + D)
			maxkey[0] = max(maxkey[0], m)
			if badacc&0x80000000 != 0 {
				bad[0] |= 1
			}
		}
	},
	"tw_sumsq": func(e *emu, grid, block int, a []any) {
		x, n, out := e.f32(ap(a[0])), au(a[1]), e.f64(ap(a[2]))
		for k := uint64(0); k < uint64(grid); k++ {
			lo := k * rblock
			hi := min(lo+rblock, n)
			ln := hi - lo
			n2 := ln / 2
			xb := x[lo:]
			var A, B float64
			var v [32][2]float32
			for g0 := uint64(0); g0 < n2; g0 += 32 {
				for lane := uint64(0); lane < 32; lane++ {
					v[lane] = [2]float32{}
					if g := g0 + lane; g < n2 {
						v[lane] = [2]float32{xb[2*g], xb[2*g+1]}
					}
				}
				cnt := min(32, n2-g0)
				for j := uint64(0); j < 32; j++ {
					w0, w1 := float64(v[j][0]), float64(v[j][1])
					if j < cnt {
						A += w0 * w0
						B += w1 * w1
					}
				}
			}
			if 2*n2 < ln {
				w := float64(xb[ln-1])
				A += w * w
			}
			out[k] = A + B
		}
	},
	"tw_maxkey": func(e *emu, grid, block int, a []any) {
		x, n, maxkey, bad := e.f32(ap(a[0])), au(a[1]), e.u32(ap(a[2])), e.u32(ap(a[3]))
		for i := uint64(0); i < n; i++ { // a grid-stride loop covers every i once
			u := math.Float32bits(x[i])
			maxkey[0] = max(maxkey[0], u&0x7fffffff)
			if expbad(u)&0x80000000 != 0 {
				bad[0] |= 1
			}
		}
	},
	"tw_terngrad": func(e *emu, grid, block int, a []any) {
		x, b, n, nb, key, inv := e.f32(ap(a[0])), e.bytesAt(ap(a[1])), au(a[2]), au(a[3]), au(a[4]), ad(a[5])
		for t := uint64(0); t < uint64(grid*block); t++ {
			if t >= nb {
				continue
			}
			var p1, p2 uint32
			for j := uint64(0); j < 8; j++ {
				i := 8*t + j
				if i >= n {
					break
				}
				v := x[i]
				p := float32(math.Abs(float64(v)) * inv)
				if unit24(rng.Draw(key, i)) < p {
					if v > 0 {
						p1 |= 0x80 >> j
					} else {
						p2 |= 0x80 >> j
					}
				}
			}
			b[t] = byte(p1)
			b[nb+t] = byte(p2)
		}
	},
	"tw_qsgd": func(e *emu, grid, block int, a []any) {
		x, codes, n, sc24b, maxT, key := e.f32(ap(a[0])), e.bytesAt(ap(a[1])), au(a[2]), au(a[3]), au(a[4]), au(a[5])
		sc24 := f32arg(sc24b)
		one := func(v float32, u uint32) byte {
			b := math.Float32bits(v)
			f := math.Float32frombits(b&0x7fffffff) * sc24
			t := min(uint32(f), uint32(maxT)) // __float2uint_rz
			l := int32(t>>24) + int32((u-(t&0xffffff))>>31)
			s := int32(b) >> 31
			return byte((l ^ s) - s)
		}
		for t := uint64(0); t < uint64(grid*block); t++ {
			i := 2 * t
			if i >= n {
				continue
			}
			blk := i / rblock
			j := (i - blk*rblock) / 2
			s := rng.Draw(key, blk) + (j+1)*0xa0761d6478bd642f
			hi, lo := bits.Mul64(s, s^0xe7037ed1a0b428db)
			r := hi ^ lo
			codes[i] = one(x[i], uint32(r>>40))
			if i+1 < n {
				codes[i+1] = one(x[i+1], uint32(r>>16)&0xffffff)
			}
		}
	},
	"tw_fp16": func(e *emu, grid, block int, a []any) {
		x, out, n, bad := e.f32(ap(a[0])), e.u16(ap(a[1])), au(a[2]), e.u32(ap(a[3]))
		for i := uint64(0); i < 4*uint64(grid*block) && i < n; i++ { // 4 elements a thread
			u := math.Float32bits(x[i])
			if expbad(u)&0x80000000 != 0 {
				bad[0] |= 1
			}
			out[i] = f32ToF16(u)
		}
	},
	"tw_bf16": func(e *emu, grid, block int, a []any) {
		x, out, n, bad := e.f32(ap(a[0])), e.u16(ap(a[1])), au(a[2]), e.u32(ap(a[3]))
		for i := uint64(0); i < 4*uint64(grid*block) && i < n; i++ { // 4 elements a thread
			u := math.Float32bits(x[i])
			if expbad(u)&0x80000000 != 0 {
				bad[0] |= 1
			}
			if u&0x7fffffff > 0x7f800000 {
				out[i] = uint16(u>>16) | 0x40
			} else {
				out[i] = uint16((u + 0x7fff + (u>>16)&1) >> 16)
			}
		}
	},
	"tw_hist": func(e *emu, grid, block int, a []any) {
		x, n, hist, shift, nbins, pmask, prefix := e.f32(ap(a[0])), au(a[1]), e.u32(ap(a[2])), au(a[3]), au(a[4]), au(a[5]), au(a[6])
		for i := uint64(0); i < n; i++ { // grid-stride loops cover every i once
			k := magkey(x[i])
			if k&uint32(pmask) == uint32(prefix) {
				hist[(k>>shift)&uint32(nbins-1)]++
			}
		}
	},
	"tw_count_ge": func(e *emu, grid, block int, a []any) {
		x, n, t, count := e.f32(ap(a[0])), au(a[1]), au(a[2]), e.u64(ap(a[3]))
		for i := uint64(0); i < n; i++ {
			if magkey(x[i]) >= uint32(t) {
				count[0]++
			}
		}
	},
	"tw_sel_count": func(e *emu, grid, block int, a []any) {
		x, n, A, B, counts := e.f32(ap(a[0])), au(a[1]), uint32(au(a[2])), uint32(au(a[3])), e.u32(ap(a[4]))
		for blk := uint64(0); blk < uint64(grid); blk++ {
			base := blk * selTile
			var ta, tb uint32
			for t := uint64(0); t < selT; t++ {
				for j := uint64(0); j < selE; j++ {
					if i := base + j*selT + t; i < n {
						k := magkey(x[i])
						if k >= A {
							ta++
						}
						if k >= B && k < A {
							tb++
						}
					}
				}
			}
			counts[2*blk], counts[2*blk+1] = ta, tb
		}
	},
	"tw_sel_write": func(e *emu, grid, block int, a []any) {
		x, n, A, B, lo, hi := e.f32(ap(a[0])), au(a[1]), uint32(au(a[2])), uint32(au(a[3])), au(a[4]), au(a[5])
		offs := e.u64(ap(a[6]))
		var vals []float32
		var idx []uint32
		if ap(a[7]) != 0 {
			vals = e.f32(ap(a[7]))
		}
		if ap(a[8]) != 0 {
			idx = e.u32(ap(a[8]))
		}
		for blk := uint64(0); blk < uint64(grid); blk++ {
			var mineA, mineB [selT]uint32
			for t := uint64(0); t < selT; t++ {
				base := blk*selTile + t*selE
				for j := uint64(0); j < selE; j++ {
					if i := base + j; i < n {
						k := magkey(x[i])
						if k >= A {
							mineA[t]++
						}
						if k >= B && k < A {
							mineB[t]++
						}
					}
				}
			}
			bscan := scanExcl(mineB[:])
			var mine [selT]uint32
			band0 := make([]uint64, selT)
			for t := range selT {
				band0[t] = offs[2*blk+1] + uint64(bscan[t])
				bl, bh := max(band0[t], lo), min(band0[t]+uint64(mineB[t]), hi)
				mine[t] = mineA[t]
				if bh > bl {
					mine[t] += uint32(bh - bl)
				}
			}
			oscan := scanExcl(mine[:])
			for t := uint64(0); t < selT; t++ {
				out := offs[2*blk] + uint64(oscan[t])
				r := band0[t]
				base := blk*selTile + t*selE
				for j := uint64(0); j < selE; j++ {
					i := base + j
					if i >= n {
						continue
					}
					v := x[i]
					k := magkey(v)
					sel := k >= A
					if !sel && k >= B {
						sel = r >= lo && r < hi
						r++
					}
					if sel {
						if vals != nil {
							vals[out] = v
						}
						if idx != nil {
							idx[out] = uint32(i)
						}
						out++
					}
				}
			}
		}
	},
	"tw_ef_compensate": func(e *emu, grid, block int, a []any) {
		g, ev, p, n, bb, gb, hase := e.f32(ap(a[0])), e.f32(ap(a[1])), e.f32(ap(a[2])), au(a[3]), au(a[4]), au(a[5]), au(a[6])
		beta, gamma := f32arg(bb), f32arg(gb)
		for i := uint64(0); i < n; i++ {
			gg := gamma * g[i]
			if hase != 0 {
				p[i] = beta*ev[i] + gg
			} else {
				p[i] = gg
			}
		}
	},
	"tw_ef_update": func(e *emu, grid, block int, a []any) {
		p, sent, ev, n := e.f32(ap(a[0])), e.f32(ap(a[1])), e.f32(ap(a[2])), au(a[3])
		for i := uint64(0); i < n; i++ {
			ev[i] = p[i] - sent[i]
		}
	},
	"tw_scatter": func(e *emu, grid, block int, a []any) {
		out, idx, vals, k := e.f32(ap(a[0])), e.u32(ap(a[1])), e.f32(ap(a[2])), au(a[3])
		for j := uint64(0); j < k; j++ {
			out[idx[j]] = vals[j]
		}
	},
	"tw_unpack_select": func(e *emu, grid, block int, a []any) {
		b, out, n, one, zero := e.bytesAt(ap(a[0])), e.f32(ap(a[1])), au(a[2]), f32arg(au(a[3])), f32arg(au(a[4]))
		for i := uint64(0); i < n; i++ {
			if b[i/8]&(0x80>>(i%8)) != 0 {
				out[i] = one
			} else {
				out[i] = zero
			}
		}
	},
	"tw_terngrad_decode": func(e *emu, grid, block int, a []any) {
		b, out, n, nb, s := e.bytesAt(ap(a[0])), e.f32(ap(a[1])), au(a[2]), au(a[3]), f32arg(au(a[4]))
		for i := uint64(0); i < n; i++ {
			sh := byte(0x80) >> (i % 8)
			switch {
			case b[i/8]&sh != 0:
				out[i] = s
			case b[nb+i/8]&sh != 0:
				out[i] = -s
			default:
				out[i] = 0
			}
		}
	},
	"tw_qsgd_decode": func(e *emu, grid, block int, a []any) {
		c, out, n, u := e.bytesAt(ap(a[0])), e.f32(ap(a[1])), au(a[2]), f32arg(au(a[3]))
		for i := uint64(0); i < n; i++ {
			out[i] = u * float32(int8(c[i]))
		}
	},
	"tw_half_decode": func(e *emu, grid, block int, a []any) {
		h, out, n, bf := e.u16(ap(a[0])), e.f32(ap(a[1])), au(a[2]), au(a[3])
		for i := uint64(0); i < n; i++ {
			if bf != 0 {
				out[i] = math.Float32frombits(uint32(h[i]) << 16)
			} else {
				out[i] = f16ToF32(uint32(h[i]))
			}
		}
	},
	"tw_zen_hash": func(e *emu, grid, block int, a []any) {
		idx, m, table, nparts, r1, r2, k := e.u32(ap(a[0])), au(a[1]), e.u32(ap(a[2])), au(a[3]), au(a[4]), au(a[5]), au(a[6])
		seeds, serial, stored, overflow, novf := e.u32(ap(a[7])), e.u32(ap(a[8])), e.u32(ap(a[9])), e.u32(ap(a[10])), e.u32(ap(a[11]))
		reduce := func(h uint32, n uint64) uint32 { return uint32((uint64(h) * n) >> 32) }
		// Threads run in a random order: every order is a valid
		// serialisation of the device's CAS and atomicAdd.
		for _, j := range e.rng.Perm(int(m)) {
			id := idx[j]
			tag := uint32(j) + 1
			p := reduce(zen.MM3(id, seeds[0]), nparts)
			row := table[uint64(p)*(r1+r2):]
			done := false
			for s := uint64(1); s <= k; s++ {
				q := reduce(zen.MM3(id, seeds[s]), r1)
				if row[q] == 0 { // atomicCAS(&row[q], 0, tag) == 0
					row[q] = tag
					stored[p]++
					done = true
					break
				}
			}
			if done {
				continue
			}
			s := serial[p]
			serial[p]++
			if uint64(s) < r2 {
				row[r1+uint64(s)] = tag
				stored[p]++
				continue
			}
			overflow[novf[0]] = uint32(j)
			novf[0]++
		}
	},
	"tw_u32nz_count": func(e *emu, grid, block int, a []any) {
		w, n, counts := e.u32(ap(a[0])), au(a[1]), e.u32(ap(a[2]))
		for blk := uint64(0); blk < uint64(grid); blk++ {
			var c uint32
			for i := blk * selTile; i < min((blk+1)*selTile, n); i++ {
				if w[i] != 0 {
					c++
				}
			}
			counts[blk] = c
		}
	},
	"tw_u32nz_write": func(e *emu, grid, block int, a []any) {
		w, n, offs, out := e.u32(ap(a[0])), au(a[1]), e.u64(ap(a[2])), e.u32(ap(a[3]))
		for blk := uint64(0); blk < uint64(grid); blk++ {
			var mine [selT]uint32
			for t := uint64(0); t < selT; t++ {
				for j := uint64(0); j < selE; j++ {
					if i := blk*selTile + t*selE + j; i < n && w[i] != 0 {
						mine[t]++
					}
				}
			}
			sc := scanExcl(mine[:])
			for t := uint64(0); t < selT; t++ {
				o := offs[blk] + uint64(sc[t])
				for j := uint64(0); j < selE; j++ {
					if i := blk*selTile + t*selE + j; i < n && w[i] != 0 {
						out[o] = w[i] - 1
						o++
					}
				}
			}
		}
	},
	"tw_bitmap_pack": func(e *emu, grid, block int, a []any) {
		x, b, n := e.f32(ap(a[0])), e.bytesAt(ap(a[1])), au(a[2])
		for t := uint64(0); t < (n+7)/8; t++ {
			var v uint32
			for j := uint64(0); j < 8; j++ {
				if i := 8*t + j; i < n && magkey(x[i]) != 0 {
					v |= 1 << j
				}
			}
			b[t] = byte(v)
		}
	},
	"tw_bitmap_count": func(e *emu, grid, block int, a []any) {
		b, nbytes, counts := e.bytesAt(ap(a[0])), au(a[1]), e.u32(ap(a[2]))
		for blk := uint64(0); blk < uint64(grid); blk++ {
			var c uint32
			for i := blk * selT * 4; i < min((blk+1)*selT*4, nbytes); i++ {
				c += uint32(bits.OnesCount8(b[i]))
			}
			counts[blk] = c
		}
	},
	"tw_bitmap_decode": func(e *emu, grid, block int, a []any) {
		b, nbits, table, offs := e.bytesAt(ap(a[0])), au(a[1]), e.u32(ap(a[2])), e.u64(ap(a[3]))
		var vals, out []float32
		var outidx []uint32
		if ap(a[4]) != 0 {
			vals = e.f32(ap(a[4]))
		}
		if ap(a[5]) != 0 {
			outidx = e.u32(ap(a[5]))
		}
		if ap(a[6]) != 0 {
			out = e.f32(ap(a[6]))
		}
		nbytes := (nbits + 7) / 8
		for blk := uint64(0); blk < uint64(grid); blk++ {
			var mine [selT]uint32
			for t := uint64(0); t < selT; t++ {
				for j := uint64(0); j < 4; j++ {
					if by := blk*selT*4 + t*4 + j; by < nbytes {
						mine[t] += uint32(bits.OnesCount8(b[by]))
					}
				}
			}
			sc := scanExcl(mine[:])
			for t := uint64(0); t < selT; t++ {
				o := offs[blk] + uint64(sc[t])
				for j := uint64(0); j < 4; j++ {
					by := blk*selT*4 + t*4 + j
					if by >= nbytes {
						break
					}
					for q := uint64(0); q < 8; q++ {
						if b[by]&(1<<q) != 0 {
							if tt := 8*by + q; tt < nbits {
								id := table[tt]
								if outidx != nil {
									outidx[o] = id
								}
								if out != nil {
									out[id] += vals[o]
								}
							}
							o++
						}
					}
				}
			}
		}
	},
}

// f32ToF16 and f16ToF32 transliterate the .cu helpers.
func f32ToF16(b uint32) uint16 {
	sign := (b >> 16) & 0x8000
	exp := int32((b >> 23) & 0xff)
	man := b & 0x7fffff
	if exp == 0xff {
		if man != 0 {
			return uint16(sign | 0x7e00 | man>>13)
		}
		return uint16(sign | 0x7c00)
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return uint16(sign | 0x7c00)
	}
	if e <= 0 {
		if e < -10 {
			return uint16(sign)
		}
		m := man | 0x800000
		shift := uint32(14 - e)
		h := m >> shift
		rem := m & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 != 0) {
			h++
		}
		return uint16(sign | h)
	}
	h := uint32(e)<<10 | man>>13
	rem := man & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 != 0) {
		h++
	}
	return uint16(sign | h)
}

func f16ToF32(h uint32) float32 {
	sign := (h & 0x8000) << 16
	exp := (h >> 10) & 0x1f
	man := h & 0x3ff
	if exp == 0x1f {
		return math.Float32frombits(sign | 0x7f800000 | man<<13)
	}
	if exp == 0 {
		if man == 0 {
			return math.Float32frombits(sign)
		}
		return math.Float32frombits(sign | math.Float32bits(float32(man)*(1.0/16777216.0)))
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

var _ = sort.Ints

var emuSigs = kernelParams()

var (
	emuLaunchedMu sync.Mutex
	emuLaunched   = map[string]bool{}
)
