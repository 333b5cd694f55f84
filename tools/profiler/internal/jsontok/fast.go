package jsontok

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The fast path: a caller that knows the shape of the values it reads
// (trace events) parses a whole object straight out of the buffer with
// the functions below, without the token state machine, and commits it
// with EndObject. The functions never read past the slice they are given
// and report ok=false on anything they do not handle (an escape, the end
// of the buffered bytes, malformed input): the caller then consumes
// nothing and reads the same value again with Next, which gives the
// errors and byte offsets. They accept exactly what Next (and Skip, for
// skipped containers) accepts, and no more.

// Window returns the unread bytes of the buffer, for the fast path. It
// reads nothing: a value that runs past them is left to Next, so the
// input is read (and its end noticed) exactly when Next alone would. It
// is empty for a Strict scanner (the fast path skips containers as Skip
// does when not Strict).
func (s *Scanner) Window() []byte {
	if s.Strict {
		return nil
	}
	return s.buf[s.pos:s.end]
}

// DepthLeft returns how many more containers may open before MaxDepth.
func (s *Scanner) DepthLeft() int { return s.opt.MaxDepth - len(s.stack) }

// EndObject consumes n bytes of the window returned by Window, which
// hold the rest of the object whose ObjStart was the last token, through
// its closing brace, as if Next had returned each of its tokens.
func (s *Scanner) EndObject(n int) {
	s.pos += n
	s.tokOff = s.base + int64(s.pos) - 1
	s.stack = s.stack[:len(s.stack)-1]
	s.after()
}

// WS returns the index of the first byte at or after i that is not JSON
// whitespace (len(b) when there is none).
func WS(b []byte, i int) int {
	for i < len(b) {
		c := b[i]
		if c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
			return i
		}
		i++
	}
	return i
}

// PlainString reads the string whose opening quote is b[i]. It returns
// its bytes and the index after the closing quote; ok is false for a
// string with an escape or a control character, or one that does not end
// within b.
func PlainString(b []byte, i int) (str []byte, next int, ok bool) {
	j := i + 1
	for ; j+8 <= len(b); j += 8 {
		v := binary.LittleEndian.Uint64(b[j:])
		q := v ^ (ones * '"')
		bs := v ^ (ones * '\\')
		qm := (q - ones) &^ q & highs
		if m := qm | ((bs-ones)&^bs|(v-ones*0x20)&^v)&highs; m != 0 {
			// the lowest flagged byte is exact (a borrow only flags
			// bytes above a true match): a quote when qm flags it
			low := m & -m
			if qm&low == 0 {
				return nil, 0, false
			}
			j += bits.TrailingZeros64(low) >> 3
			return b[i+1 : j], j + 1, true
		}
	}
	for ; j < len(b); j++ {
		c := b[j]
		if strStop[c] {
			if c == '"' {
				return b[i+1 : j], j + 1, true
			}
			return nil, 0, false
		}
	}
	return nil, 0, false
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// Num is a number read by ScanNum.
type Num struct {
	parts numParts
	tok   []byte
}

// Bytes returns the number's text.
func (n *Num) Bytes() []byte { return n.tok }

// Scaled is Scanner.Scaled for n.
func (n *Num) Scaled(scale int) (int64, bool) { return scaled(&n.parts, n.tok, scale) }

// ScanNum reads the number that starts at b[i] into n and returns the
// index after it; ok is false for a malformed number or one that runs to
// the end of b.
func ScanNum(b []byte, i int, n *Num) (next int, ok bool) {
	m, ok, done := scanNumber(b[i:], &n.parts)
	if !ok || !done {
		return 0, false
	}
	n.tok = b[i : i+m]
	return i + m, true
}

// SkipNum is ScanNum without the value.
func SkipNum(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		i++
		for i < len(b) && b[i]-'0' <= 9 {
			i++
		}
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && b[i]-'0' <= 9 {
			i++
		}
		if i == j {
			return 0, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && b[i]-'0' <= 9 {
			i++
		}
		if i == j {
			return 0, false
		}
	}
	if i >= len(b) || isNumByte(b[i]) {
		return 0, false
	}
	return i, true
}

// SkipValue skips the value that starts at b[i] (whitespace before it
// already skipped) and returns the index after it. Scalars are checked as
// Next checks them; containers as Skip checks them, with at most
// depthLeft levels of nesting. ok is false for what the fast path does
// not handle (see PlainString) and for malformed input.
func SkipValue(b []byte, i int, depthLeft int) (next int, ok bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; c {
	case '"':
		_, next, ok = PlainString(b, i)
		return next, ok
	case '{', '[':
		return skipContainer(b, i, depthLeft)
	case 't':
		return lit(b, i, "true")
	case 'f':
		return lit(b, i, "false")
	case 'n':
		return lit(b, i, "null")
	}
	return SkipNum(b, i)
}

func lit(b []byte, i int, w string) (int, bool) {
	if len(b)-i < len(w) || string(b[i:i+len(w)]) != w {
		return 0, false
	}
	return i + len(w), true
}

// byte classes outside strings in a skipped container
const (
	cBad = iota
	cSkip
	cQuote
	cOpen
	cClose
)

var skipClass [256]uint8

// initSkipClass runs from jsontok.go's init, after skipByte is set.
func initSkipClass() {
	for c := range skipByte {
		if skipByte[c] {
			skipClass[c] = cSkip
		}
	}
	skipClass['"'] = cQuote
	skipClass['{'], skipClass['['] = cOpen, cOpen
	skipClass['}'], skipClass[']'] = cClose, cClose
}

// skipContainer is skipFast over a slice: brackets match, strings end,
// escapes are well-formed and only JSON's bytes appear outside strings.
func skipContainer(b []byte, i int, depthLeft int) (int, bool) {
	var stack [64]byte
	depth := 0
	for i < len(b) {
		c := b[i]
		switch skipClass[c] {
		case cSkip:
			i++
		case cQuote:
			j := i + 1
			for {
				for ; j+8 <= len(b); j += 8 {
					v := binary.LittleEndian.Uint64(b[j:])
					q := v ^ (ones * '"')
					bs := v ^ (ones * '\\')
					if ((q-ones)&^q|(bs-ones)&^bs|(v-ones*0x20)&^v)&highs != 0 {
						break
					}
				}
				for j < len(b) && !strStop[b[j]] {
					j++
				}
				if j >= len(b) {
					return 0, false
				}
				if b[j] == '"' {
					break
				}
				if b[j] != '\\' || j+1 >= len(b) || !validEscape[b[j+1]] {
					return 0, false
				}
				j += 2
			}
			i = j + 1
		case cOpen:
			if depth >= len(stack) || depth >= depthLeft {
				return 0, false
			}
			stack[depth] = c
			depth++
			i++
		case cClose:
			if depth == 0 || stack[depth-1] != c-2 { // '}'-2 == '{', ']'-2 == '['
				return 0, false
			}
			depth--
			i++
			if depth == 0 {
				return i, true
			}
		default:
			return 0, false
		}
	}
	return 0, false
}

// ScanScaled reads the number that starts at b[i] as ScanNum does and
// returns its value times 10^scale (0 ≤ scale ≤ 9) as Scaled does, in one
// pass for the common forms (no exponent, at most 18 integer digits);
// others go through ScanNum and Scaled. next is the index after the
// number; ok is ScanNum's, vok Scaled's.
func ScanScaled(b []byte, i int, scale int) (v int64, vok bool, next int, ok bool) {
	start := i
	neg := false
	if i < len(b) && b[i] == '-' {
		neg = true
		i++
	}
	if i >= len(b) || scale < 0 || scale > 9 {
		return scanScaledSlow(b, start, scale)
	}
	var ip int64
	switch c := b[i]; {
	case c == '0':
		i++
	case c-'1' <= 8:
		j := i
		// 8 digits at a time while they fit in the 18
		for i+8 <= len(b) && i-j <= 10 {
			v := binary.LittleEndian.Uint64(b[i:])
			if v&0xf0f0f0f0f0f0f0f0 != 0x3030303030303030 || (v+0x0606060606060606)&0xf0f0f0f0f0f0f0f0 != 0x3030303030303030 {
				break
			}
			ip = ip*1e8 + int64(eightDigits(v))
			i += 8
		}
		for i < len(b) && b[i]-'0' <= 9 && i-j < 18 {
			ip = ip*10 + int64(b[i]-'0')
			i++
		}
		if i < len(b) && b[i]-'0' <= 9 {
			return scanScaledSlow(b, start, scale) // more than 18 digits
		}
	default:
		return 0, false, 0, false
	}
	var frac int64
	fd := 0
	round := false
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && b[i]-'0' <= 9 {
			if fd < scale {
				frac = frac*10 + int64(b[i]-'0')
				fd++
			} else if i == j+scale {
				round = b[i] >= '5'
			}
			i++
		}
		if i == j {
			return 0, false, 0, false
		}
	}
	if i >= len(b) {
		return 0, false, 0, false
	}
	if c := b[i]; isNumByte(c) {
		if c == 'e' || c == 'E' {
			return scanScaledSlow(b, start, scale)
		}
		return 0, false, 0, false
	}
	pw := pow10[scale]
	if ip > maxScaled[scale] {
		return scanScaledSlow(b, start, scale)
	}
	v = ip*pw + frac*pow10[scale-fd]
	if round {
		v++
	}
	if neg {
		v = -v
	}
	return v, true, i, true
}

func scanScaledSlow(b []byte, i int, scale int) (int64, bool, int, bool) {
	var n Num
	next, ok := ScanNum(b, i, &n)
	if !ok {
		return 0, false, 0, false
	}
	v, vok := n.Scaled(scale)
	return v, vok, next, true
}

// eightDigits converts 8 ASCII digits, the first in the low byte, to
// their value.
func eightDigits(v uint64) uint64 {
	v -= 0x3030303030303030
	v = v*10 + v>>8 // pairs of digits in every other byte
	return ((v&0x000000ff000000ff)*(100+1000000<<32) + (v>>16&0x000000ff000000ff)*(1+10000<<32)) >> 32
}

// maxScaled[s] is the largest integer part that scale s does not
// overflow: (MaxInt64 - 10^s) / 10^s, without a division per number.
var maxScaled = func() (m [10]int64) {
	for i, p := range pow10 {
		m[i] = (math.MaxInt64 - p) / p
	}
	return
}()
