package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"trainwire.dev/lib/wire"
)

// Output is where a verb writes its result (-o): stdout, or a file that
// only ever appears complete — an AtomicFile, renamed over NAME by Commit
// once the verb has succeeded, removed by Close without Commit. A verb that
// fails, is interrupted or is killed therefore never leaves a file cut
// mid-frame under NAME (a killed one may leave its dot-named temporary
// file). A symbolic link is followed: the file it points to is replaced,
// the link kept. Existing non-regular files (/dev/null, a FIFO) are
// written in place.
type Output struct {
	w       io.Writer
	atomic  *AtomicFile // a regular file
	inPlace *os.File    // a non-regular one
	name    string      // as the user gave it
	closed  bool
}

// CreateOutput opens the output name: "-" or "" is stdout (Commit and
// Close then do nothing).
func CreateOutput(name string, stdout io.Writer) (*Output, error) {
	if name == "-" || name == "" {
		return &Output{w: stdout, closed: true}, nil
	}
	if st, err := os.Stat(name); err == nil && !st.Mode().IsRegular() {
		if st.IsDir() {
			return nil, fmt.Errorf("output %s is a directory", name)
		}
		f, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		return &Output{w: f, inPlace: f, name: name}, nil
	}
	target := name
	if real, err := filepath.EvalSymlinks(name); err == nil {
		target = real // replace the file a link points to, not the link
	}
	a, err := CreateAtomic(target)
	if err != nil {
		return nil, fmt.Errorf("output %s: %w", name, err)
	}
	return &Output{w: a, atomic: a, name: name}, nil
}

// Write writes to the output.
func (o *Output) Write(p []byte) (int, error) { return o.w.Write(p) }

// Name is how messages name the output: its path, or "stdout".
func (o *Output) Name() string {
	if o.name == "" {
		return "stdout"
	}
	return o.name
}

// Commit makes the output final: the file is synced, closed and renamed
// over its name. Call it once the verb has succeeded.
func (o *Output) Commit() error {
	if o.closed {
		return nil
	}
	o.closed = true
	if o.inPlace != nil {
		return o.inPlace.Close()
	}
	if err := o.atomic.Commit(); err != nil {
		return fmt.Errorf("output %s: %w", o.name, err)
	}
	return nil
}

// Close discards an output that was not committed (its temporary file is
// removed; the file at its name, if any, is left as it was). It is safe to
// defer.
func (o *Output) Close() error {
	if o.closed {
		return nil
	}
	o.closed = true
	if o.inPlace != nil {
		return o.inPlace.Close()
	}
	o.atomic.Abort()
	return nil
}

// EndStream ends a verb's output stream by the verb's outcome: Close (the
// end frame) when err is nil, else Abort with an error frame saying why,
// so a failed run's stream is never complete (docs/wire.md). It returns
// err, or Close's error. Use it where a verb returns, or deferred:
//
//	defer func() { err = cli.EndStream(w, err) }()
func EndStream(w *wire.Writer, err error) error {
	if err == nil {
		return w.Close()
	}
	_ = w.Abort(ErrorFrame(err))
	return err
}

// ErrorFrame is the in-band error frame for err: its code says what the
// exit code says (bad_input, peer_failed, interrupted, usage, failed).
func ErrorFrame(err error) *wire.Error {
	code := "failed"
	switch {
	case errors.Is(err, context.Canceled):
		code = "interrupted"
	default:
		switch ExitCodeOf(err) {
		case ExitBadInput:
			code = "bad_input"
		case ExitPeer:
			code = "peer_failed"
		case ExitInterrupted:
			code = "interrupted"
		case ExitUsage:
			code = "usage"
		}
	}
	return &wire.Error{Code: code, Msg: err.Error(), Rank: -1, Frame: -1}
}
