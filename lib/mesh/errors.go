package mesh

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"trainwire.dev/lib/exit"
)

// ErrClosed is returned by operations on a mesh after Close.
var ErrClosed = errors.New("mesh: closed")

// ErrDesync is wrapped by the error a receive returns when the message that
// arrived is not the one expected (other tag, length or sequence number):
// the ranks called different collectives, or the same one with different
// lengths.
var ErrDesync = errors.New("protocol desync")

// ErrAuth is wrapped by every authentication failure: a peer that does not
// know the job token, or that refused ours.
var ErrAuth = errors.New("authentication failed")

// PeerError reports that a rank failed: it died, hung past the deadline,
// refused us, or broke the protocol. Rank is the rank held responsible.
//
// When the failure was decided by rank 0 (the job-wide verdict broadcast
// to every rank, see the package documentation), ReportedBy is the rank
// that first saw it and Peer the rank this process was talking to when the
// abort reached it; otherwise ReportedBy is -1 and Peer equals Rank.
type PeerError struct {
	// Rank is the failed rank.
	Rank int
	// Op is what this process was doing: "rendezvous", "connect",
	// "send reduce-scatter", "recv allgather", ….
	Op string
	// Err is the cause, e.g. "connection closed by peer (process died?)".
	Err error
	// Peer is the rank this process was exchanging with in Op.
	Peer int
	// ReportedBy is the rank that observed the failure, or -1 when this
	// process observed it itself.
	ReportedBy int
}

// Error renders e as
//
//	mesh: rank 2: recv reduce-scatter: connection closed by peer (process died?)
//
// or, for a job-wide verdict,
//
//	mesh: rank 2 failed: killed or exited (control connection lost) (reported by rank 0; this rank was in recv reduce-scatter with rank 3)
func (e *PeerError) Error() string {
	if e.ReportedBy < 0 {
		if e.Op == "" {
			return fmt.Sprintf("mesh: rank %d: %v", e.Rank, e.Err)
		}
		return fmt.Sprintf("mesh: rank %d: %s: %v", e.Rank, e.Op, e.Err)
	}
	s := fmt.Sprintf("mesh: rank %d failed: %v (reported by rank %d", e.Rank, e.Err, e.ReportedBy)
	if e.Op != "" {
		if e.Peer >= 0 && e.Peer != e.Rank {
			s += fmt.Sprintf("; this rank was in %s with rank %d", e.Op, e.Peer)
		} else {
			s += "; this rank was in " + e.Op
		}
	}
	return s + ")"
}

// Unwrap returns the cause.
func (e *PeerError) Unwrap() error { return e.Err }

// ExitCode is ExitPeer (3), so trainwire's cli maps a peer failure to its
// documented exit code.
func (e *PeerError) ExitCode() int { return exit.Peer }

// verdict is the job-wide decision about which rank failed and why.
type verdict struct {
	Rank     int    `json:"rank"`
	Reason   string `json:"reason"`
	Reporter int    `json:"reporter"`
}

// errorFor turns the verdict into the error an operation returns.
// A reason that crossed the control wire is text; one that begins with
// ErrDesync's or ErrAuth's words (they are rendered "%w: …") keeps that
// sentinel in the chain, so errors.Is works on every rank, not only on
// the one that saw the failure.
func (v *verdict) errorFor(op string, peer int) *PeerError {
	var cause error = errors.New(v.Reason)
	for _, s := range []error{ErrDesync, ErrAuth} {
		if strings.HasPrefix(v.Reason, s.Error()+":") {
			cause = &causeError{msg: v.Reason, cause: s}
		}
	}
	return &PeerError{Rank: v.Rank, Op: op, Err: cause, Peer: peer, ReportedBy: v.Reporter}
}

// causeError is a described network error that keeps the original in its
// chain (errors.Is(err, io.EOF) still works).
type causeError struct {
	msg   string
	cause error
}

func (e *causeError) Error() string { return e.msg }
func (e *causeError) Unwrap() error { return e.cause }

// describe turns a network error into the words a user needs; timeout is
// the deadline that expired when it is --timeout's, 0 for any other (a
// dial's: the message must not name --timeout then).
func describe(err error, timeout time.Duration) string {
	var ne net.Error
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.ECONNABORTED):
		return "connection closed by peer (process died?)"
	case (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) && timeout <= 0:
		return "timed out (no answer: host down, unreachable or filtered?)"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return fmt.Sprintf("no progress for %v (peer hung, stopped or too slow? see --timeout)", timeout)
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (not listening: not started yet, or exited?)"
	}
	return err.Error()
}
