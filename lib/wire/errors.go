package wire

import (
	"errors"
	"fmt"
)

// ErrTruncated is wrapped by the error a Reader returns when its input
// ends inside a frame or before a stream's End frame.
var ErrTruncated = errors.New("stream truncated")

// ErrDigest is wrapped by the error a Reader returns when an End frame's
// count or digest does not match what was read.
var ErrDigest = errors.New("end frame does not match the stream")

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
func (e *DecodeError) ExitCode() int { return 2 }

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
