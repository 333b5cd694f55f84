package codec

// The plain references the fast paths are tested against: test-only, so
// they live beside the tests rather than in the package.

import (
	"math"

	"trainwire.dev/lib/rng"
)

// splitSums returns the sums of the elements with the sign bit set and
// clear, and the count of the former, branch-free: each element is masked
// into one of two float32 partial sums of 8, added to float64 in order.
func splitSums(x []float32) (neg, pos float64, nneg int) {
	n8 := len(x) / 8
	var cnt uint32
	for j := 0; j < n8; j++ {
		v := (*[8]float32)(x[8*j:])
		var sn, sp float32
		for _, f := range v {
			u := math.Float32bits(f)
			m := uint32(int32(u) >> 31)
			sn += math.Float32frombits(u & m)
			sp += math.Float32frombits(u &^ m)
			cnt += u >> 31
		}
		neg += float64(sn)
		pos += float64(sp)
	}
	for _, f := range x[8*n8:] {
		if math.Signbit(float64(f)) {
			neg += float64(f)
			cnt++
		} else {
			pos += float64(f)
		}
	}
	return neg, pos, int(cnt)
}

// signSumsRef is signSums' plain twin (sums in float64 directly).
func signSumsRef(dst []byte, x []float32) (sum, sumAbs float64) {
	packSignRef(dst, x)
	for _, v := range x {
		sum += float64(v)
		sumAbs += math.Abs(float64(v))
	}
	return
}

// packSignBitsAbs is packSignBits that also returns Σ|x| over the slice
// in float64, accumulated per 8 elements in float32 then float64... no:
// it sums every |x| in float64 with four accumulators, in a fixed order.
func packSignBitsAbs(dst []byte, x []float32) (ok bool, sum float64) {
	n8 := len(x) / 8
	var bad uint32
	var s0, s1, s2, s3 float64
	for j := 0; j < n8; j++ {
		v := (*[8]float32)(x[8*j:])
		u0, u1, u2, u3 := math.Float32bits(v[0]), math.Float32bits(v[1]), math.Float32bits(v[2]), math.Float32bits(v[3])
		u4, u5, u6, u7 := math.Float32bits(v[4]), math.Float32bits(v[5]), math.Float32bits(v[6]), math.Float32bits(v[7])
		bad |= expBad(u0) | expBad(u1) | expBad(u2) | expBad(u3) | expBad(u4) | expBad(u5) | expBad(u6) | expBad(u7)
		b := u0>>31<<7 | u1>>31<<6 | u2>>31<<5 | u3>>31<<4 | u4>>31<<3 | u5>>31<<2 | u6>>31<<1 | u7>>31
		dst[j] = ^byte(b)
		s0 += float64(math.Float32frombits(u0&0x7fffffff)) + float64(math.Float32frombits(u4&0x7fffffff))
		s1 += float64(math.Float32frombits(u1&0x7fffffff)) + float64(math.Float32frombits(u5&0x7fffffff))
		s2 += float64(math.Float32frombits(u2&0x7fffffff)) + float64(math.Float32frombits(u6&0x7fffffff))
		s3 += float64(math.Float32frombits(u3&0x7fffffff)) + float64(math.Float32frombits(u7&0x7fffffff))
	}
	if r := len(x) % 8; r != 0 {
		var b byte
		for i, v := range x[8*n8:] {
			u := math.Float32bits(v)
			bad |= expBad(u)
			if u>>31 == 0 {
				b |= 0x80 >> i
			}
			s0 += float64(math.Float32frombits(u & 0x7fffffff))
		}
		dst[n8] = b
	}
	return bad&0x80000000 == 0, (s0 + s1) + (s2 + s3)
}

// mstopkRef is MSTopK's plain twin: the same algorithm on float64
// magnitudes, serial, with no early stop.
func mstopkRef(x []float32, k, N int, key uint64) []uint32 {
	d := len(x)
	if k <= 0 || d == 0 {
		return []uint32{}
	}
	if k >= d {
		return topkRef(x, d)
	}
	a := make([]float64, d)
	var sum, u float64
	for i, v := range x {
		a[i] = math.Abs(float64(v))
		sum += a[i]
		u = math.Max(u, a[i])
	}
	mean := sum / float64(d)
	l, r := 0.0, 1.0
	k1, k2 := 0, d
	thres1, thres2 := math.Inf(1), 0.0
	for it := 0; it < N; it++ {
		ratio := l + (r-l)/2
		t := mean + ratio*(u-mean)
		nnz := 0
		for _, v := range a {
			if v >= t {
				nnz++
			}
		}
		if nnz <= k {
			r = ratio
			if nnz > k1 {
				k1, thres1 = nnz, t
			}
		} else {
			l = ratio
			if nnz < k2 {
				k2, thres2 = nnz, t
			}
		}
	}
	var i1, i2 []uint32
	for i, v := range a {
		if v >= thres1 {
			i1 = append(i1, uint32(i))
		} else if v >= thres2 {
			i2 = append(i2, uint32(i))
		}
	}
	need := k - len(i1)
	s := rng.Seq{Key: key}
	start := int(s.Below(uint64(len(i2)-need) + 1))
	out := append(append([]uint32{}, i1...), i2[start:start+need]...)
	sortU32(out)
	return out
}
