// Package crc32c combines CRC32C (Castagnoli) checksums: the CRC of a
// concatenation from the CRCs of its parts, without reading the bytes
// again. The checksums are hash/crc32's (pre- and post-inverted, as
// crc32.Checksum with the Castagnoli table returns them).
//
// The method is the one zlib uses since 1.2.12: crc(A‖B) is crc(A)
// multiplied by x^(8·len(B)) modulo the polynomial, plus crc(B); the power
// comes from a table of x^(2^k) by square-and-multiply, so a combine costs
// O(log len) carry-less products of 32 steps each.
package crc32c

// poly is the Castagnoli polynomial, bit-reflected.
const poly = 0x82f63b78

// x2n[k] is x^(2^k) modulo poly, reflected (x^0 is 1<<31); k reaches
// 3+62 for an int64 byte count. (zlib keeps 32 entries and wraps, which
// holds only for an irreducible polynomial; this needs no such fact.)
var x2n = func() (t [66]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = mulmod(p, p)
	}
	return t
}()

// mulmod returns a·b modulo poly, both reflected.
func mulmod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			if a&(m-1) == 0 {
				break
			}
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// xpow8 returns x^(8·n) modulo poly.
func xpow8(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n > 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = mulmod(x2n[k], p)
		}
	}
	return p
}

// Combine returns the CRC32C of A‖B from crcA = CRC32C(A), crcB =
// CRC32C(B) and lenB = len(B). A negative lenB is treated as 0.
func Combine(crcA, crcB uint32, lenB int64) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return mulmod(xpow8(lenB), crcA) ^ crcB
}
