package wire

// PeekLen is how many bytes PeekType needs at most: a map32 header, the
// key "t" and a type name of up to 16 bytes, and the key "v".
const PeekLen = 5 + 2 + 2 + 16 + 2

// PeekType returns the type of the frame that b starts with, read from
// its first bytes alone (see PeekLen): b must start with a msgpack map of
// at least two entries whose first key is "t" (a str value, the type) and
// whose second key is "v", as every frame does (docs/wire.md). It is false
// when b does not start so, or is too short to tell. It validates nothing
// else; a Reader does. Tools use it to tell a stream from other bytes
// without consuming them: a stream starts with PeekType == TypeHeader,
// which a byte string that merely starts with a map code (0x80–0x8f, 0xde,
// 0xdf) almost never does.
func PeekType(b []byte) (string, bool) {
	if len(b) == 0 {
		return "", false
	}
	var n, off int
	switch c := b[0]; {
	case c >= 0x80 && c <= 0x8f:
		n, off = int(c&0x0f), 1
	case c == 0xde && len(b) >= 3:
		n, off = int(b[1])<<8|int(b[2]), 3
	case c == 0xdf && len(b) >= 5:
		n, off = int(b[1])<<24|int(b[2])<<16|int(b[3])<<8|int(b[4]), 5
	default:
		return "", false
	}
	if n < 2 {
		return "", false
	}
	var k, typ, v string
	var ok bool
	b = b[off:]
	if k, b, ok = peekStr(b); !ok || k != "t" {
		return "", false
	}
	if typ, b, ok = peekStr(b); !ok || typ == "" {
		return "", false
	}
	if v, _, ok = peekStr(b); !ok || v != "v" {
		return "", false
	}
	return typ, true
}

// peekStr reads a msgpack str (any of its four encodings) of at most 16
// bytes at the start of b.
func peekStr(b []byte) (string, []byte, bool) {
	if len(b) == 0 {
		return "", nil, false
	}
	var n, off int
	switch c := b[0]; {
	case c >= 0xa0 && c <= 0xbf:
		n, off = int(c&0x1f), 1
	case c == 0xd9 && len(b) >= 2:
		n, off = int(b[1]), 2
	case c == 0xda && len(b) >= 3:
		n, off = int(b[1])<<8|int(b[2]), 3
	case c == 0xdb && len(b) >= 5:
		n, off = int(b[1])<<24|int(b[2])<<16|int(b[3])<<8|int(b[4]), 5
	default:
		return "", nil, false
	}
	if n > 16 || len(b) < off+n {
		return "", nil, false
	}
	return string(b[off : off+n]), b[off+n:], true
}
