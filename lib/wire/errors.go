package wire

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"unicode/utf8"

	"trainwire.dev/lib/exit"
)

// ErrTruncated is wrapped by the error a Reader returns when its input
// ends inside a frame or before a stream's End frame. It is bad input:
// the tool exits 2 wherever it surfaces.
var ErrTruncated error = &exit.Error{Code: exit.BadInput, Err: errors.New("stream truncated")}

// ErrDigest is wrapped by the error a Reader returns when an End frame's
// count or digest does not match what was read (exit 2).
var ErrDigest error = &exit.Error{Code: exit.BadInput, Err: errors.New("end frame does not match the stream")}

// ErrNotStream is wrapped by the error a Reader returns when a frame
// starts with a byte no frame starts with, such as JSON or other text
// where a stream was expected (exit 2).
var ErrNotStream error = &exit.Error{Code: exit.BadInput, Err: errors.New("not a trainwire stream")}

// notStream describes input that cannot be a frame, from what br has
// buffered (it never waits for more): JSON, other text, or a stray byte.
func notStream(br *bufio.Reader) error {
	p, _ := br.Peek(min(br.Buffered(), 40))
	if !looksText(p) {
		return fmt.Errorf("%w: byte 0x%02x cannot start a frame (a frame is a msgpack map)", ErrNotStream, p[0])
	}
	body := bytes.TrimLeft(p, " \t\r\n")
	what := "text"
	if len(body) > 0 && (body[0] == '{' || body[0] == '[') {
		what = "JSON"
	}
	if i := bytes.IndexByte(body, '\n'); i >= 0 {
		body = body[:i]
	}
	for !utf8.Valid(body) {
		body = body[:len(body)-1] // a character cut where the buffer ends
	}
	return fmt.Errorf("this looks like %s, %w (it starts with %q)", what, ErrNotStream, body)
}

// looksText says whether p is UTF-8 text without control characters other
// than tab, CR and LF (a character cut at the end of p is allowed).
func looksText(p []byte) bool {
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if r == utf8.RuneError && n <= 1 {
			return !utf8.FullRune(p[i:])
		}
		if r < ' ' && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return false
		}
		i += n
	}
	return true
}

// DecodeError is a malformed stream: it names the frame (its index in the
// input, 0 being the first header), the byte offset where that frame
// starts, the frame type and field when known.
type DecodeError struct {
	Frame  int64
	Offset int64
	Type   string
	Field  string
	Err    error
}

func (e *DecodeError) Error() string {
	s := fmt.Sprintf("wire: frame %d", e.Frame)
	if e.Type != "" {
		s += " (" + e.Type + ")"
	}
	s += fmt.Sprintf(" at byte %d", e.Offset)
	if e.Field != "" {
		s += fmt.Sprintf(": field %q", e.Field)
	}
	return s + ": " + e.Err.Error()
}

// Unwrap returns the underlying error.
func (e *DecodeError) Unwrap() error { return e.Err }

// ExitCode makes tools exit with 2 (bad input) on a malformed stream.
func (e *DecodeError) ExitCode() int { return exit.BadInput }

// fieldError carries the field name up to where the frame index is known.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return fmt.Sprintf("field %q: %v", e.field, e.err) }
func (e *fieldError) Unwrap() error { return e.err }

func fieldErr(field string, err error) error {
	if err == nil {
		return nil
	}
	var fe *fieldError
	if errors.As(err, &fe) {
		return err
	}
	return &fieldError{field: field, err: err}
}
