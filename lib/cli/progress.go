package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// ProgressOptions describe a progress bar.
type ProgressOptions struct {
	// Label is the text before the bar ("gen", "persist").
	Label string
	// Total is the amount of work, or ≤ 0 when unknown (a spinner with
	// the count so far); SetTotal may give it later.
	Total int64
	// Bytes: the work is counted in bytes (shown as kB/MB, with a rate).
	Bytes bool
	// Mode is "auto" (or ""): drawn only when the writer is a terminal;
	// "always"; or "never".
	Mode string
}

// Progress is the one progress bar of the tools (schollz/progressbar), on
// stderr for long work: drawn only when stderr is a terminal, unless
// asked otherwise, so a pipe or a log file never holds one. Every method
// is safe on a nil Progress and from several goroutines.
type Progress struct {
	mu  sync.Mutex
	bar *progressbar.ProgressBar // nil: not drawn
	w   io.Writer
}

// NewProgress returns a bar on w, drawn by o.Mode's rule.
func NewProgress(w io.Writer, o ProgressOptions) *Progress {
	on := o.Mode == "always" || (o.Mode != "never" && IsTerminal(w))
	if !on {
		return &Progress{}
	}
	total := o.Total
	if total <= 0 {
		total = -1
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(o.Label),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
	}
	if o.Bytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	}
	return &Progress{bar: progressbar.NewOptions64(total, opts...), w: w}
}

// Progress is a bar on the verb's stderr, drawn only when it is a
// terminal.
func (rio *IO) Progress(label string, total int64, bytes bool) *Progress {
	return NewProgress(rio.Stderr, ProgressOptions{Label: label, Total: total, Bytes: bytes})
}

// SetTotal sets the amount of work once it is known.
func (p *Progress) SetTotal(n int64) {
	p.do(func(b *progressbar.ProgressBar) { b.ChangeMax64(n) })
}

// Set says how much of the work is done.
func (p *Progress) Set(n int64) {
	p.do(func(b *progressbar.ProgressBar) { _ = b.Set64(n) })
}

// Add adds n to the work done.
func (p *Progress) Add(n int64) {
	p.do(func(b *progressbar.ProgressBar) { _ = b.Add64(n) })
}

// Done draws the bar a last time and ends its line.
func (p *Progress) Done() {
	p.do(func(b *progressbar.ProgressBar) {
		_ = b.Finish()
		fmt.Fprintln(p.w)
	})
}

// do runs fn on the bar, if one is drawn.
func (p *Progress) do(fn func(*progressbar.ProgressBar)) {
	if p == nil || p.bar == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p.bar)
}

// InputSize is the bytes of the named input files, for a progress bar's
// total: 0 (unknown) when one is stdin ("-" or none) or not a regular
// file.
func InputSize(files []string) int64 {
	var n int64
	if len(files) == 0 {
		return 0
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if f == "-" || err != nil || !st.Mode().IsRegular() {
			return 0
		}
		n += st.Size()
	}
	return n
}

// ReaderSize is the bytes of r when it is a regular file (stdin
// redirected from one), for a progress bar's total; 0 (unknown) for a
// pipe, a terminal or anything else.
func ReaderSize(r io.Reader) int64 {
	f, ok := r.(*os.File)
	if !ok {
		return 0
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return 0
	}
	return st.Size()
}
