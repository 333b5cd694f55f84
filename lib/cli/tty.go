package cli

import (
	"errors"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ErrBinaryToTerminal is a verb's error when its first bytes for stdout
// are a binary trainwire stream and stdout is a terminal: they would fill
// the screen with msgpack. Exit 80: the command line must change.
var ErrBinaryToTerminal = &ExitError{Code: ExitUsage, Err: errors.New(
	"stdout is a terminal: refusing to write a binary trainwire stream to it; redirect it to a file (> out.tw) or the next tool (| …), read it with `| hashsync dump`, or choose a human form where the verb has one (--format table or json)")}

// IsTerminal says whether w (a verb's rio.Stdout, say) is a terminal: a
// verb whose stream is an extra beside a human report skips the stream
// there instead of failing.
func IsTerminal(w io.Writer) bool {
	if _, ok := w.(*ttyGuard); ok {
		return true
	}
	return isTerminal(w)
}

// isTerminal says whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// ttyGuard is stdout when it is a terminal: a first write that starts a
// msgpack map (a stream's header frame; no text starts with a byte in
// 0x80–0x8f, UTF-8's continuation bytes, nor 0xde/0xdf, map16/map32) is
// refused with ErrBinaryToTerminal, anything else passes.
type ttyGuard struct {
	w       io.Writer
	checked bool
}

func (g *ttyGuard) Write(p []byte) (int, error) {
	if !g.checked && len(p) > 0 {
		g.checked = true
		if b := p[0]; (b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf {
			return 0, ErrBinaryToTerminal
		}
	}
	return g.w.Write(p)
}

// guardTerminal wraps stdout in a ttyGuard when it is a terminal.
func guardTerminal(stdout io.Writer) io.Writer {
	if isTerminal(stdout) {
		return &ttyGuard{w: stdout}
	}
	return stdout
}
