// Package exit holds trainwire's process exit codes and the error types
// that carry them — the one place they are defined. It imports nothing of
// trainwire's, so every package can say which code its errors mean: the
// stream decoder (bad input, 2), the mesh (a peer failed, 3), the codecs,
// the tools' internals. lib/cli maps an error to the process's code with
// CodeOf's rule and re-exports the constants for the CLI layer.
//
// The codes are documented in README.md and docs/ARCHITECTURE.md.
package exit

import (
	"errors"
	"fmt"
)

// The exit codes shared by every tool.
const (
	// OK: the command did what it was asked.
	OK = 0
	// Failure: a runtime failure not covered below (I/O error, …).
	Failure = 1
	// BadInput: the input stream or file is malformed (truncated, wrong
	// types, lengths over a limit, digest mismatch).
	BadInput = 2
	// Peer: a peer rank died, hung past its deadline, or refused us.
	Peer = 3
	// Skipped: nothing was done because another run holds the lock (a cron
	// job overlapping the previous one); try again later. 75 is
	// sysexits.h's EX_TEMPFAIL.
	Skipped = 75
	// Usage: bad flags or arguments (kong's convention).
	Usage = 80
	// Interrupted: stopped by SIGINT (128+2).
	Interrupted = 130
	// Terminated: stopped by SIGTERM (128+15).
	Terminated = 143
)

// Coder is implemented by errors that choose their process exit code.
type Coder interface {
	ExitCode() int
}

// Error wraps an error with an exit code.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// ExitCode returns the exit code.
func (e *Error) ExitCode() int { return e.Code }

// WithCode wraps err so that the tool exits with code. A nil err stays nil.
func WithCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Code: code, Err: err}
}

// BadInputf is an error about the user's input (exit 2), formatted as
// fmt.Errorf formats (%w wraps).
func BadInputf(format string, a ...any) error {
	return &Error{Code: BadInput, Err: fmt.Errorf(format, a...)}
}

// CodeOf is the exit code err asks for: the code of the first Coder in its
// chain, else Failure (OK for nil).
func CodeOf(err error) int {
	if err == nil {
		return OK
	}
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return Failure
}
