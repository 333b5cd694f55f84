package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"trainwire.dev/lib/wire"
)

// Output is where a verb writes its result (-o): stdout, or a file that
// only ever appears complete. A file is written under a temporary name in
// its directory (.NAME.tmp-XXXXXXXX, so the rename stays on one
// filesystem); Commit syncs it and renames it over NAME once the verb has
// succeeded, and Close without Commit removes it. A verb that fails, is
// interrupted or is killed therefore never leaves a file cut mid-frame
// under NAME (a killed one may leave its dot-named temporary file).
// Existing non-regular files (/dev/null, a FIFO) are written in place.
type Output struct {
	w      io.Writer
	f      *os.File
	tmp    string // the temporary file, "" when writing in place
	path   string // where it goes (symbolic links resolved)
	name   string // as the user gave it
	closed bool
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
		return &Output{w: f, f: f, path: name, name: name}, nil
	}
	target := name
	if real, err := filepath.EvalSymlinks(name); err == nil {
		target = real // replace the file a link points to, not the link
	}
	dir, base := filepath.Split(target)
	for range 100 {
		var rnd [4]byte
		_, _ = rand.Read(rnd[:])
		tmp := filepath.Join(dir, "."+base+".tmp-"+hex.EncodeToString(rnd[:]))
		// 0666 less the umask, as os.Create would give NAME.
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", name, err)
		}
		return &Output{w: f, f: f, tmp: tmp, path: target, name: name}, nil
	}
	return nil, fmt.Errorf("output %s: no free temporary name in %s", name, filepath.Dir(name))
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
	if o.tmp == "" {
		return o.f.Close()
	}
	err := o.f.Sync()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.tmp, o.path)
	}
	if err != nil {
		_ = os.Remove(o.tmp)
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
	err := o.f.Close()
	if o.tmp != "" {
		err = os.Remove(o.tmp)
	}
	return err
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
