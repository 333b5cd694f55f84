package serve

import (
	"encoding/binary"
	"fmt"
	"math"
)

// cur reads msgpack values from a message held in memory. Every length it
// returns has been checked against the bytes left, so nothing is allocated
// for a length the message does not hold; off is the byte offset named in
// errors.
type cur struct {
	b   []byte
	off int
}

// maxDepth bounds the nesting of values skipped (unknown keys).
const maxDepth = 16

func (c *cur) errf(format string, a ...any) error {
	return fmt.Errorf("at byte %d: "+format, append([]any{c.off}, a...)...)
}

func (c *cur) need(n int) error {
	if n < 0 || n > len(c.b)-c.off {
		return c.errf("message ends inside a value (%d bytes needed, %d left)", n, len(c.b)-c.off)
	}
	return nil
}

func (c *cur) byte() (byte, error) {
	if err := c.need(1); err != nil {
		return 0, err
	}
	c.off++
	return c.b[c.off-1], nil
}

func (c *cur) peek() (byte, error) {
	if err := c.need(1); err != nil {
		return 0, err
	}
	return c.b[c.off], nil
}

// be reads an n-byte big-endian unsigned integer.
func (c *cur) be(n int) (uint64, error) {
	if err := c.need(n); err != nil {
		return 0, err
	}
	var v uint64
	for _, x := range c.b[c.off : c.off+n] {
		v = v<<8 | uint64(x)
	}
	c.off += n
	return v, nil
}

// typeName names the msgpack type that code starts.
func typeName(code byte) string {
	switch {
	case code <= 0x7f || code >= 0xe0 || (code >= 0xcc && code <= 0xd3):
		return "int"
	case code >= 0x80 && code <= 0x8f, code == 0xde, code == 0xdf:
		return "map"
	case code >= 0x90 && code <= 0x9f, code == 0xdc, code == 0xdd:
		return "array"
	case code >= 0xa0 && code <= 0xbf, code == 0xd9, code == 0xda, code == 0xdb:
		return "str"
	case code == 0xc4, code == 0xc5, code == 0xc6:
		return "bin"
	case code == 0xc0:
		return "nil"
	case code == 0xc2, code == 0xc3:
		return "bool"
	case code == 0xca, code == 0xcb:
		return "float"
	case code == 0xc1:
		return "never-used code 0xc1"
	}
	return "ext"
}

// length reads a container or string header of the given kind and returns
// its length (elements for map and array, bytes for str and bin).
func (c *cur) length(kind string) (int, error) {
	code, err := c.byte()
	if err != nil {
		return 0, err
	}
	if got := typeName(code); got != kind {
		c.off--
		return 0, c.errf("is %s, want %s", got, kind)
	}
	var n uint64
	switch {
	case code >= 0x80 && code <= 0x8f:
		n = uint64(code & 0x0f)
	case code >= 0x90 && code <= 0x9f:
		n = uint64(code & 0x0f)
	case code >= 0xa0 && code <= 0xbf:
		n = uint64(code & 0x1f)
	case code == 0xd9 || code == 0xc4:
		n, err = c.be(1)
	case code == 0xda || code == 0xc5 || code == 0xde || code == 0xdc:
		n, err = c.be(2)
	default:
		n, err = c.be(4)
	}
	if err != nil {
		return 0, err
	}
	// Each element takes at least one byte (a map's two), so a count
	// larger than the bytes left is a lie, checked before any allocation.
	min := n
	if kind == "map" {
		min = 2 * n
	}
	if min > uint64(len(c.b)-c.off) {
		return 0, c.errf("%s of %d claims more than the %d bytes left", kind, n, len(c.b)-c.off)
	}
	return int(n), nil
}

// str reads a str of at most max bytes.
func (c *cur) str(max int) (string, error) {
	n, err := c.length("str")
	if err != nil {
		return "", err
	}
	if n > max {
		return "", c.errf("string of %d bytes, at most %d", n, max)
	}
	s := string(c.b[c.off : c.off+n])
	c.off += n
	return s, nil
}

// bin returns a view of a bin's bytes inside the message.
func (c *cur) bin() ([]byte, error) {
	n, err := c.length("bin")
	if err != nil {
		return nil, err
	}
	b := c.b[c.off : c.off+n : c.off+n]
	c.off += n
	return b, nil
}

// int reads any msgpack integer that fits an int64.
func (c *cur) int() (int64, error) {
	code, err := c.byte()
	if err != nil {
		return 0, err
	}
	switch {
	case code <= 0x7f:
		return int64(code), nil
	case code >= 0xe0:
		return int64(int8(code)), nil
	case code >= 0xcc && code <= 0xcf:
		v, err := c.be(1 << (code - 0xcc))
		if err == nil && v > math.MaxInt64 {
			return 0, c.errf("integer %d does not fit an int64", v)
		}
		return int64(v), err
	case code >= 0xd0 && code <= 0xd3:
		n := 1 << (code - 0xd0)
		v, err := c.be(n)
		if err != nil {
			return 0, err
		}
		shift := 64 - 8*n
		return int64(v<<shift) >> shift, nil
	}
	c.off--
	return 0, c.errf("is %s, want int", typeName(code))
}

// bool reads a bool.
func (c *cur) bool() (bool, error) {
	code, err := c.byte()
	if err != nil {
		return false, err
	}
	switch code {
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	}
	c.off--
	return false, c.errf("is %s, want bool", typeName(code))
}

// skip passes over one value of any type, nested at most maxDepth deep.
func (c *cur) skip(depth int) error {
	if depth > maxDepth {
		return c.errf("values nested more than %d deep", maxDepth)
	}
	code, err := c.peek()
	if err != nil {
		return err
	}
	switch t := typeName(code); t {
	case "map", "array":
		n, err := c.length(t)
		if err != nil {
			return err
		}
		if t == "map" {
			n *= 2
		}
		for range n {
			if err := c.skip(depth + 1); err != nil {
				return err
			}
		}
		return nil
	case "str", "bin":
		n, err := c.length(t)
		if err != nil {
			return err
		}
		c.off += n
		return nil
	case "int":
		c.off++
		if code >= 0xcc && code <= 0xd3 {
			_, err := c.be(1 << ((code - 0xcc) & 3))
			return err
		}
		return nil
	}
	c.off++
	var n int
	switch code {
	case 0xc0, 0xc2, 0xc3:
	case 0xca:
		n = 4
	case 0xcb:
		n = 8
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1..16
		n = 1 + 1<<(code-0xd4)
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32
		l, err := c.be(1 << (code - 0xc7))
		if err != nil {
			return err
		}
		if l > uint64(len(c.b)) {
			return c.errf("ext of %d bytes", l)
		}
		n = 1 + int(l)
	default:
		c.off--
		return c.errf("never-used msgpack code 0xc1")
	}
	if err := c.need(n); err != nil {
		return err
	}
	c.off += n
	return nil
}

// Appenders of the canonical encoding (docs/wire.md): smallest headers and
// integers.

func appendMapLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x80|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xde), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdf), uint32(n))
}

func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, 0x90|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xdc), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, 0xdd), uint32(n))
}

func appendStr(b []byte, s string) []byte {
	n := len(s)
	switch {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

func appendBin(b []byte, p []byte) []byte {
	n := len(p)
	switch {
	case n <= math.MaxUint8:
		b = append(b, 0xc4, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xc5), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xc6), uint32(n))
	}
	return append(b, p...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 0xc3)
	}
	return append(b, 0xc2)
}

func appendInt(b []byte, v int64) []byte {
	switch {
	case v >= 0 && v <= 0x7f:
		return append(b, byte(v))
	case v < 0 && v >= -32:
		return append(b, byte(v))
	case v >= 0 && v <= math.MaxUint8:
		return append(b, 0xcc, byte(v))
	case v >= 0 && v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(v))
	case v >= 0 && v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(v))
	case v >= 0:
		return binary.BigEndian.AppendUint64(append(b, 0xcf), uint64(v))
	case v >= math.MinInt8:
		return append(b, 0xd0, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(v))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(v))
}
