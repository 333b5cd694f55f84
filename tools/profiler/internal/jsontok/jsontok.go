// Package jsontok is a streaming JSON tokenizer: it reads one token at a
// time from an io.Reader through a fixed buffer, validates the grammar as it
// goes, and names the byte offset of every error. Memory stays flat however
// large the document: only the longest single token must fit in the buffer
// (bounded by MaxToken).
//
// It exists because trace files are hundreds of megabytes to gigabytes of
// JSON and encoding/json's Decoder allocates per token; this scanner hands
// out views into its buffer instead.
package jsontok

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is a token kind.
type Kind uint8

// Token kinds.
const (
	EOF Kind = iota
	ObjStart
	ObjEnd
	ArrStart
	ArrEnd
	String // a string value
	Key    // a string in key position (the colon is consumed)
	Number
	True
	False
	Null
)

var kindNames = [...]string{"end of input", "'{'", "'}'", "'['", "']'", "string", "key", "number", "true", "false", "null"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// SyntaxError is malformed or truncated JSON at a byte offset.
type SyntaxError struct {
	Offset int64
	Msg    string
	// Truncated: the input ended early (errors.Is(err, ErrTruncated)).
	Truncated bool
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("json: %s at byte %d", e.Msg, e.Offset) }

// ErrTruncated is wrapped by syntax errors caused by the input ending early.
var ErrTruncated = errors.New("truncated")

// Unwrap returns ErrTruncated for truncated input.
func (e *SyntaxError) Unwrap() error {
	if e.Truncated {
		return ErrTruncated
	}
	return nil
}

// Options tune a Scanner.
type Options struct {
	// BufSize is the read buffer size (default 256 KiB).
	BufSize int
	// MaxToken bounds one token (a string or number) in bytes (default 64 MiB).
	MaxToken int
	// MaxDepth bounds nesting (default 512).
	MaxDepth int
	// Unterminated accepts a top-level array whose closing bracket is
	// missing, after a complete element and an optional trailing comma, as
	// Horovod ≤ 0.20 timelines are written.
	Unterminated bool
}

// state of the grammar: what may come next.
type state uint8

const (
	stValue      state = iota // a value (top level, after ':' or after ',' in an array)
	stFirstValue              // a value or ']' (just after '[')
	stFirstKey                // a key or '}' (just after '{')
	stKey                     // a key (after ',' in an object)
	stAfter                   // ',' or the closer (after a value inside a container)
	stDone                    // after the top-level value
)

// Scanner reads tokens. The zero value is not usable: call New.
type Scanner struct {
	r    io.Reader
	buf  []byte
	pos  int   // next unread byte in buf
	end  int   // bytes valid in buf
	base int64 // offset of buf[0] in the input
	eof  bool
	rerr error

	opt   Options
	stack []byte // '{' or '['
	st    state

	tok     []byte // current string (unescaped) or number text
	tokOff  int64
	scratch []byte
	keyBuf  []byte
	failAt  int
	parts   numParts
	// Unterminated was used: the closing bracket was missing.
	lenient bool
	// Strict makes Skip tokenize skipped values fully (full grammar
	// checks, slower).
	Strict bool
}

// New returns a Scanner of r.
func New(r io.Reader, opt Options) *Scanner {
	if opt.BufSize <= 0 {
		opt.BufSize = 256 << 10
	}
	if opt.MaxToken <= 0 {
		opt.MaxToken = 64 << 20
	}
	if opt.MaxDepth <= 0 {
		opt.MaxDepth = 512
	}
	return &Scanner{r: r, buf: make([]byte, opt.BufSize), opt: opt, stack: make([]byte, 0, 16)}
}

// NewBytes returns a Scanner of a complete document held in memory: it
// tokenizes b in place, without copying it.
func NewBytes(b []byte, opt Options) *Scanner {
	s := New(nil, Options{BufSize: 1, MaxToken: opt.MaxToken, MaxDepth: opt.MaxDepth, Unterminated: opt.Unterminated})
	s.buf, s.end, s.eof = b, len(b), true
	return s
}

// Offset returns the byte offset where the current token starts.
func (s *Scanner) Offset() int64 { return s.tokOff }

// Pos returns the number of bytes consumed so far.
func (s *Scanner) Pos() int64 { return s.base + int64(s.pos) }

// Depth returns the current nesting depth (1 inside the top-level container).
func (s *Scanner) Depth() int { return len(s.stack) }

// Bytes returns the current String/Key (unescaped) or Number (raw text).
// It is valid until the next call to Next or Skip.
func (s *Scanner) Bytes() []byte { return s.tok }

// ClosedLeniently reports whether a missing closing bracket was accepted.
func (s *Scanner) ClosedLeniently() bool { return s.lenient }

func (s *Scanner) errAt(off int64, format string, a ...any) error {
	return &SyntaxError{Offset: off, Msg: fmt.Sprintf(format, a...)}
}

func (s *Scanner) truncAt(off int64, what string) error {
	return &SyntaxError{Offset: off, Msg: "input ends inside " + what, Truncated: true}
}

// fill makes at least n unread bytes available if the input has them;
// it reports whether it could. Bytes before pos are discarded.
func (s *Scanner) fill(n int) bool {
	if s.end-s.pos >= n {
		return true
	}
	if s.eof {
		return false
	}
	if s.pos > 0 {
		copy(s.buf, s.buf[s.pos:s.end])
		s.base += int64(s.pos)
		s.end -= s.pos
		s.pos = 0
	}
	for s.end-s.pos < n {
		if s.end == len(s.buf) {
			if len(s.buf) >= s.opt.MaxToken+64 {
				return false
			}
			nb := make([]byte, min(2*len(s.buf), s.opt.MaxToken+64))
			copy(nb, s.buf[:s.end])
			s.buf = nb
		}
		m, err := s.r.Read(s.buf[s.end:])
		s.end += m
		if err != nil {
			s.eof = true
			if err != io.EOF {
				s.rerr = err
			}
			return s.end-s.pos >= n
		}
	}
	return true
}

// skipWS advances past whitespace and returns the next byte, or false at
// the end of the input.
func (s *Scanner) skipWS() (byte, bool) {
	for {
		for s.pos < s.end {
			c := s.buf[s.pos]
			if c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
				return c, true
			}
			s.pos++
		}
		if !s.fill(1) {
			return 0, false
		}
	}
}

// Next returns the next token.
func (s *Scanner) Next() (Kind, error) {
	for {
		var c byte
		ok := true
		if s.pos < s.end && s.buf[s.pos] > ' ' {
			c = s.buf[s.pos]
		} else if s.pos+1 < s.end && s.buf[s.pos] == ' ' && s.buf[s.pos+1] > ' ' {
			s.pos++ // ", " and ": ": one space
			c = s.buf[s.pos]
		} else {
			c, ok = s.skipWS()
		}
		off := s.Pos()
		s.tokOff = off
		if !ok {
			if s.rerr != nil {
				return EOF, fmt.Errorf("json: reading at byte %d: %w", off, s.rerr)
			}
			return s.atEOF(off)
		}
		switch s.st {
		case stAfter:
			top := s.stack[len(s.stack)-1]
			switch {
			case c == ',':
				s.pos++
				if top == '{' {
					s.st = stKey
				} else {
					s.st = stValue
				}
				continue
			case c == '}' && top == '{', c == ']' && top == '[':
				s.pos++
				return s.close(c), nil
			}
			if top == '{' {
				return EOF, s.errAt(off, "expected ',' or '}' after an object member, found %s", quote(c))
			}
			return EOF, s.errAt(off, "expected ',' or ']' after an array element, found %s", quote(c))
		case stDone:
			return EOF, s.errAt(off, "unexpected %s after the top-level value", quote(c))
		case stFirstKey, stKey:
			if c == '}' && s.st == stFirstKey {
				s.pos++
				return s.close(c), nil
			}
			if c != '"' {
				return EOF, s.errAt(off, "expected a string key, found %s", quote(c))
			}
			if err := s.str(); err != nil {
				return EOF, err
			}
			if s.pos < s.end && s.buf[s.pos] == ':' {
				s.pos++
			} else {
				// skipWS may refill the buffer under the key's view
				s.keyBuf = append(s.keyBuf[:0], s.tok...)
				s.tok = s.keyBuf
				c2, ok := s.skipWS()
				if !ok {
					return EOF, s.truncAt(s.Pos(), "an object (expected ':')")
				}
				if c2 != ':' {
					return EOF, s.errAt(s.Pos(), "expected ':' after an object key, found %s", quote(c2))
				}
				s.pos++
			}
			s.st = stValue
			return Key, nil
		case stFirstValue:
			if c == ']' {
				s.pos++
				return s.close(c), nil
			}
		}
		return s.value(c, off)
	}
}

func (s *Scanner) atEOF(off int64) (Kind, error) {
	switch {
	case s.st == stDone:
		return EOF, nil
	case len(s.stack) == 0:
		return EOF, s.truncAt(off, "the document (no value)")
	case s.opt.Unterminated && len(s.stack) == 1 && s.stack[0] == '[' && (s.st == stAfter || s.st == stValue || s.st == stFirstValue):
		s.lenient = true
		s.stack = s.stack[:0]
		s.st = stDone
		return ArrEnd, nil
	case s.stack[len(s.stack)-1] == '{':
		return EOF, s.truncAt(off, "an object")
	default:
		return EOF, s.truncAt(off, "an array")
	}
}

func (s *Scanner) close(c byte) Kind {
	s.stack = s.stack[:len(s.stack)-1]
	s.after()
	if c == '}' {
		return ObjEnd
	}
	return ArrEnd
}

func (s *Scanner) after() {
	if len(s.stack) == 0 {
		s.st = stDone
	} else {
		s.st = stAfter
	}
}

func (s *Scanner) push(c byte, off int64) error {
	if len(s.stack) >= s.opt.MaxDepth {
		return s.errAt(off, "nesting deeper than %d", s.opt.MaxDepth)
	}
	s.stack = append(s.stack, c)
	return nil
}

func (s *Scanner) value(c byte, off int64) (Kind, error) {
	switch c {
	case '{':
		if err := s.push('{', off); err != nil {
			return EOF, err
		}
		s.pos++
		s.st = stFirstKey
		return ObjStart, nil
	case '[':
		if err := s.push('[', off); err != nil {
			return EOF, err
		}
		s.pos++
		s.st = stFirstValue
		return ArrStart, nil
	case '"':
		if err := s.str(); err != nil {
			return EOF, err
		}
		s.after()
		return String, nil
	case 't':
		return s.lit("true", True, off)
	case 'f':
		return s.lit("false", False, off)
	case 'n':
		return s.lit("null", Null, off)
	}
	if c == '-' || (c >= '0' && c <= '9') {
		if err := s.num(off); err != nil {
			return EOF, err
		}
		s.after()
		return Number, nil
	}
	return EOF, s.errAt(off, "expected a value, found %s", quote(c))
}

func (s *Scanner) lit(w string, k Kind, off int64) (Kind, error) {
	if !s.fill(len(w)) {
		if bytes.HasPrefix([]byte(w), s.buf[s.pos:s.end]) {
			return EOF, s.truncAt(off, "a literal")
		}
	}
	n := min(len(w), s.end-s.pos)
	if string(s.buf[s.pos:s.pos+n]) != w {
		return EOF, s.errAt(off, "invalid literal (expected %s)", w)
	}
	s.pos += len(w)
	s.after()
	return k, nil
}

// num scans a number per RFC 8259, validating as it goes.
func (s *Scanner) num(off int64) error {
	for {
		n, ok, done := scanNumber(s.buf[s.pos:s.end], &s.parts)
		if done || s.eof {
			if !ok || !done && s.eof && !validNumber(s.buf[s.pos:s.pos+n]) {
				t := s.buf[s.pos : s.pos+n]
				if s.pos+n == s.end && s.eof {
					return s.truncAt(off, "a number")
				}
				return s.errAt(off, "invalid number %q", clip(t))
			}
			s.tok = s.buf[s.pos : s.pos+n]
			s.pos += n
			return nil
		}
		// the number runs to the end of the buffer: read more
		if n > s.opt.MaxToken || !s.fill(n+1) {
			if !s.eof {
				return s.errAt(off, "number longer than %d bytes", s.opt.MaxToken)
			}
		}
	}
}

// numParts is what scanning a number learned of its value, so that
// Scaled need not read it again.
type numParts struct {
	neg    bool
	ip     int64 // integer part (when simple)
	frac   int64 // the first fd fraction digits
	fd     int
	simple bool // no exponent, at most 18 integer digits
}

// scanNumber returns the length of the number at the start of b, whether
// it is valid, whether it ended before the end of b, and its parts.
func scanNumber(b []byte, p *numParts) (n int, ok, done bool) {
	*p = numParts{}
	i := 0
	if i < len(b) && b[i] == '-' {
		p.neg = true
		i++
	}
	if i >= len(b) {
		return i, false, false
	}
	start := i
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			p.ip = p.ip*10 + int64(b[i]-'0')
			i++
		}
	default:
		return i, false, true
	}
	p.simple = i-start <= 18
	if i < len(b) && b[i] == '.' {
		i++
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			if p.fd < 10 {
				p.frac = p.frac*10 + int64(b[i]-'0')
				p.fd++
			}
			i++
		}
		if i == j {
			return i, false, i < len(b)
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		p.simple = false
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := i
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
		}
		if i == j {
			return i, false, i < len(b)
		}
	}
	if i >= len(b) {
		return i, true, false
	}
	if isNumByte(b[i]) {
		// "01", "1.2.3", "1-": a malformed number
		for i < len(b) && isNumByte(b[i]) {
			i++
		}
		return i, false, true
	}
	return i, true, true
}

// Scaled returns the current Number times 10^scale (0 ≤ scale ≤ 9),
// rounded half away from zero, as ParseScaled does, without reading the
// digits again.
func (s *Scanner) Scaled(scale int) (int64, bool) { return scaled(&s.parts, s.tok, scale) }

func scaled(p *numParts, tok []byte, scale int) (int64, bool) {
	if !p.simple || scale < 0 || scale > 9 {
		return ParseScaled(tok, scale)
	}
	pw := pow10[scale]
	if p.ip > maxScaled[scale] {
		return ParseScaled(tok, scale)
	}
	f, fd := p.frac, p.fd
	round := false
	if fd > scale {
		d := pow10[fd-scale-1]
		round = (f/d)%10 >= 5
		f /= d * 10
	} else {
		f *= pow10[scale-fd]
	}
	v := p.ip*pw + f
	if round {
		v++
	}
	if p.neg {
		v = -v
	}
	return v, true
}

func isNumByte(c byte) bool {
	return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E'
}

func validNumber(t []byte) bool {
	i := 0
	if i < len(t) && t[i] == '-' {
		i++
	}
	if i >= len(t) {
		return false
	}
	if t[i] == '0' {
		i++
	} else if t[i] >= '1' && t[i] <= '9' {
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
		}
	} else {
		return false
	}
	if i < len(t) && t[i] == '.' {
		i++
		j := i
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		i++
		if i < len(t) && (t[i] == '+' || t[i] == '-') {
			i++
		}
		j := i
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
		}
		if i == j {
			return false
		}
	}
	return i == len(t)
}

// str scans a string starting at the opening quote at s.pos.
func (s *Scanner) str() error {
	off := s.Pos()
	s.pos++ // opening quote
	start := s.pos
	for {
		// fast path: one pass to the closing quote, stopping at a
		// backslash or a control character
		rest := s.buf[start:s.end]
		i := plainPrefix(rest)
		for i < len(rest) && !strStop[rest[i]] {
			i++
		}
		if i < len(rest) {
			switch c := rest[i]; {
			case c == '"':
				s.tok = rest[:i]
				s.pos = start + i + 1
				return nil
			case c == '\\':
				return s.strEscaped(off, start)
			default:
				return s.errAt(off, "control character in a string")
			}
		}
		n := s.end - start
		if n > s.opt.MaxToken {
			return s.errAt(off, "string longer than %d bytes", s.opt.MaxToken)
		}
		s.pos = start - 1
		if !s.fill(n + 2) {
			if s.eof {
				return s.truncAt(s.Pos()+int64(s.end-s.pos), "a string")
			}
			return s.errAt(off, "string longer than %d bytes", s.opt.MaxToken)
		}
		start = s.pos + 1
	}
}

// strEscaped unescapes a string with backslashes into scratch.
func (s *Scanner) strEscaped(off int64, i int) error {
	out := s.scratch[:0]
	for {
		if i >= s.end {
			if len(out) > s.opt.MaxToken {
				return s.errAt(off, "string longer than %d bytes", s.opt.MaxToken)
			}
			// everything before i is in out: let fill discard it
			s.pos = i
			if !s.fill(1) {
				s.scratch = out
				return s.truncAt(s.Pos(), "a string")
			}
			i = s.pos
		}
		c := s.buf[i]
		switch {
		case c == '"':
			s.pos = i + 1
			s.scratch = out
			s.tok = out
			return nil
		case c < 0x20:
			return s.errAt(s.base+int64(i), "control character in a string")
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		// escape: need up to 12 bytes (\uXXXX\uXXXX)
		s.pos = i
		s.fill(12)
		i = s.pos
		if i+1 >= s.end {
			s.scratch = out
			return s.truncAt(s.base+int64(s.end), "a string")
		}
		e := s.buf[i+1]
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s.buf[i+2 : min(i+6, s.end)])
			if !ok {
				if i+6 > s.end && s.eof {
					return s.truncAt(s.base+int64(s.end), "a string")
				}
				return s.errAt(s.base+int64(i), "invalid \\u escape")
			}
			n := 6
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if i+12 <= s.end && s.buf[i+6] == '\\' && s.buf[i+7] == 'u' {
					if v, ok := hex4(s.buf[i+8 : i+12]); ok {
						r2 = v
					}
				}
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					r, n = d, 12
				} else {
					r = utf8.RuneError
				}
			}
			out = utf8.AppendRune(out, r)
			i += n
			continue
		default:
			return s.errAt(s.base+int64(i), "invalid escape \\%c", e)
		}
		i += 2
	}
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// Skip skips the rest of the value whose first token k was just returned
// (nothing for scalars; through the matching closer for containers).
//
// Containers are skipped by a fast byte scan that checks what a reader
// that ignores the value can check cheaply: brackets match, strings end,
// escapes are well-formed and only JSON's bytes appear outside strings.
// It does not check commas and colons inside the skipped value; Next-based
// reading (Strict) does.
func (s *Scanner) Skip(k Kind) error {
	if k != ObjStart && k != ArrStart {
		return nil
	}
	if s.Strict {
		depth := len(s.stack) - 1
		for len(s.stack) > depth {
			if _, err := s.Next(); err != nil {
				return err
			}
		}
		return nil
	}
	_, err := s.skipFast(false, nil)
	return err
}

// AppendValue appends the raw bytes of the value whose first token k was
// just returned (a container: from its opening bracket through the
// matching closer) to dst. It checks brackets, strings and escapes, not
// the bytes between them: it is for a caller that parses the value again.
// Scalars append nothing: their bytes are not kept.
func (s *Scanner) AppendValue(k Kind, dst []byte) ([]byte, error) {
	switch k {
	case ObjStart:
		dst = append(dst, '{')
	case ArrStart:
		dst = append(dst, '[')
	default:
		return dst, nil
	}
	return s.skipFast(true, dst)
}

// Unread returns up to n bytes of the input from where the last
// AppendValue or Skip stopped on a malformed byte (they are still in the
// buffer), so that a caller can re-parse the broken value with its
// context.
func (s *Scanner) Unread(n int) []byte {
	if s.failAt < 0 || s.failAt > s.end {
		return nil
	}
	return s.buf[s.failAt:min(s.end, s.failAt+n)]
}

func (s *Scanner) skipFast(capture bool, dst []byte) ([]byte, error) {
	s.failAt = -1
	base := len(s.stack) - 1
	inStr := false
	mark := s.pos
	// fail keeps the bytes before the error in dst: a caller that
	// re-parses them sees the same input up to that point
	fail := func(at int, err error) ([]byte, error) {
		if capture && at >= mark {
			dst = append(dst, s.buf[mark:at]...)
		}
		s.failAt = at
		return dst, err
	}
	for {
		if s.pos >= s.end {
			if capture {
				dst = append(dst, s.buf[mark:s.pos]...)
			}
			ok := s.fill(1)
			mark = s.pos
			if !ok {
				if s.rerr != nil {
					return dst, fmt.Errorf("json: reading at byte %d: %w", s.Pos(), s.rerr)
				}
				what := "an array"
				if s.stack[len(s.stack)-1] == '{' {
					what = "an object"
				}
				if inStr {
					what = "a string"
				}
				return dst, s.truncAt(s.Pos(), what)
			}
		}
		if inStr {
			// find the closing quote, honouring escapes
			rest := s.buf[s.pos:s.end]
			i := plainPrefix(rest)
			for i < len(rest) {
				c := rest[i]
				if c == '"' {
					break
				}
				if c == '\\' {
					if i+1 >= len(rest) {
						break // refill with the backslash kept
					}
					if !validEscape[rest[i+1]] {
						return fail(s.pos+i, s.errAt(s.Pos()+int64(i), "invalid escape \\%c", rest[i+1]))
					}
					i += 2
					continue
				}
				if c < 0x20 {
					return fail(s.pos+i, s.errAt(s.Pos()+int64(i), "control character in a string"))
				}
				i++
			}
			if i < len(rest) && rest[i] == '"' {
				s.pos += i + 1
				inStr = false
				continue
			}
			s.pos += i
			if i < len(rest) { // a lone backslash at the end of the buffer
				if capture {
					dst = append(dst, s.buf[mark:s.pos]...)
				}
				ok := s.fill(2)
				mark = s.pos
				if !ok {
					return dst, s.truncAt(s.Pos(), "a string")
				}
			}
			continue
		}
		if capture {
			// capturing for a parser that checks the bytes again: only
			// strings and brackets matter here
			for s.pos < s.end && !structural[s.buf[s.pos]] {
				s.pos++
			}
			if s.pos >= s.end {
				continue
			}
		}
		c := s.buf[s.pos]
		switch c {
		case '"':
			inStr = true
			s.pos++
		case '{', '[':
			if len(s.stack) >= s.opt.MaxDepth {
				return fail(s.pos, s.errAt(s.Pos(), "nesting deeper than %d", s.opt.MaxDepth))
			}
			s.stack = append(s.stack, c)
			s.pos++
		case '}', ']':
			open := byte('{')
			if c == ']' {
				open = '['
			}
			if s.stack[len(s.stack)-1] != open {
				return fail(s.pos, s.errAt(s.Pos(), "unexpected %s", quote(c)))
			}
			s.stack = s.stack[:len(s.stack)-1]
			s.pos++
			if len(s.stack) == base {
				s.after()
				if capture {
					dst = append(dst, s.buf[mark:s.pos]...)
				}
				return dst, nil
			}
		default:
			if !skipByte[c] {
				return fail(s.pos, s.errAt(s.Pos(), "unexpected %s", quote(c)))
			}
			s.pos++
		}
	}
}

// plainPrefix returns a length, a multiple of 8, of b's prefix without a
// quote, a backslash or a control character (SWAR: 8 bytes per step).
func plainPrefix(b []byte) int {
	const (
		ones  = 0x0101010101010101
		highs = 0x8080808080808080
	)
	i := 0
	for ; i+8 <= len(b); i += 8 {
		v := binary.LittleEndian.Uint64(b[i:])
		q := v ^ (ones * '"')
		bs := v ^ (ones * '\\')
		if ((q-ones)&^q|(bs-ones)&^bs|(v-ones*0x20)&^v)&highs != 0 {
			break
		}
	}
	return i
}

var skipByte, validEscape, strStop, structural [256]bool

func init() {
	for c := 0; c < 0x20; c++ {
		strStop[c] = true
	}
	strStop['"'], strStop['\\'] = true, true
	for _, c := range []byte(`"{}[]`) {
		structural[c] = true
	}
	for _, c := range []byte(" \t\r\n,:0123456789+-.eEtruefalsn") {
		skipByte[c] = true
	}
	for _, c := range []byte(`"\\/bfnrtu`) {
		validEscape[c] = true
	}
	initSkipClass()
}

func quote(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("'%c'", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func clip(b []byte) []byte {
	if len(b) > 32 {
		return b[:32]
	}
	return b
}
