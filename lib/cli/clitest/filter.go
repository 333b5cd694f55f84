package clitest

import (
	"bufio"
	"context"
	"io"
	"os"
	"testing"
	"time"

	"trainwire.dev/lib/wire"
)

// AnswerWithin is how long Filter.Read waits for an answer by default: far
// more than any answer takes, so only a filter that holds its answer back
// (until more input or EOF) fails.
const AnswerWithin = 20 * time.Second

// Filter is a tool running as a real process with pipes for stdin and
// stdout, so a test can write a step, read its answer while stdin is
// still open, then write the next step, as a training loop does
// (docs/wire.md, "Steps").
type Filter struct {
	*Proc
	in    *os.File
	out   *os.File
	w     *wire.Writer
	items chan any // frames, or lines of text
	err   error    // why items closed; read after it is closed
}

// StartFilter starts bin with args under ctx (see Start) and reads its
// stdout as a stream while it runs (Read).
func StartFilter(t testing.TB, ctx context.Context, bin string, env []string, args ...string) *Filter {
	t.Helper()
	f := startPiped(t, ctx, bin, env, args)
	go f.readFrames()
	return f
}

// StartLineFilter is StartFilter for a filter that writes lines of text
// (dump: JSON lines), read with ReadLines.
func StartLineFilter(t testing.TB, ctx context.Context, bin string, env []string, args ...string) *Filter {
	t.Helper()
	f := startPiped(t, ctx, bin, env, args)
	go f.readLines()
	return f
}

func startPiped(t testing.TB, ctx context.Context, bin string, env, args []string) *Filter {
	t.Helper()
	inR, inW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	f := &Filter{Proc: command(ctx, bin, env, args), in: inW, w: wire.NewWriter(inW, "clitest"),
		items: make(chan any, 1<<12)}
	f.Cmd.Stdin, f.Cmd.Stdout = inR, outW
	f.start(t)
	inR.Close()
	outW.Close()
	f.out = outR
	t.Cleanup(func() { f.in.Close() })
	return f
}

func (f *Filter) readFrames() {
	defer f.out.Close()
	defer close(f.items)
	r := wire.NewReader(f.out, wire.Limits{})
	for {
		fr, err := r.NextFrame()
		if err != nil {
			f.err = err
			return
		}
		f.items <- fr
	}
}

func (f *Filter) readLines() {
	defer f.out.Close()
	defer close(f.items)
	br := bufio.NewReader(f.out)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			f.err = err
			return
		}
		f.items <- line
	}
}

// Write writes frames to the filter's stdin and flushes them.
func (f *Filter) Write(t testing.TB, frames ...wire.Frame) {
	t.Helper()
	for _, fr := range frames {
		if err := f.w.Write(fr); err != nil {
			t.Fatalf("writing to %s: %v", f.Cmd.Path, err)
		}
	}
	if err := f.w.Flush(); err != nil {
		t.Fatalf("writing to %s: %v", f.Cmd.Path, err)
	}
}

// Read returns the next n frames the filter writes (headers left out),
// failing t if they do not all come within AnswerWithin.
func (f *Filter) Read(t testing.TB, n int) []wire.Frame {
	t.Helper()
	var got []wire.Frame
	for _, it := range f.next(t, n, false) {
		got = append(got, it.(wire.Frame))
	}
	return got
}

// ReadLines returns the next n lines a line filter writes, failing t if
// they do not all come within AnswerWithin.
func (f *Filter) ReadLines(t testing.TB, n int) []string {
	t.Helper()
	var got []string
	for _, it := range f.next(t, n, false) {
		got = append(got, it.(string))
	}
	return got
}

// next collects n items (headers left out), or all of them until the
// output ends when all is set.
func (f *Filter) next(t testing.TB, n int, all bool) []any {
	t.Helper()
	deadline := time.NewTimer(AnswerWithin)
	defer deadline.Stop()
	var got []any
	for all || len(got) < n {
		select {
		case it, ok := <-f.items:
			if !ok && all {
				return got
			}
			if !ok {
				t.Fatalf("%s: output ended (%v) after %d of %d items %v; stderr:\n%s", f.Cmd.Path, f.err, len(got), n, kinds(got), f.Stderr.String())
			}
			if _, hdr := it.(*wire.Header); !hdr {
				got = append(got, it)
			}
		case <-deadline.C:
			t.Fatalf("%s: no answer within %v while its stdin is open: %d of %d items %v; stderr:\n%s", f.Cmd.Path, AnswerWithin, len(got), n, kinds(got), f.Stderr.String())
		}
	}
	return got
}

// Close ends the input stream and closes stdin, then returns what the
// filter still writes (frames, headers left out, or lines) until it exits,
// and its exit code.
func (f *Filter) Close(t testing.TB) ([]any, int) {
	t.Helper()
	if err := f.w.Close(); err != nil {
		t.Fatalf("writing to %s: %v", f.Cmd.Path, err)
	}
	f.in.Close()
	rest := f.next(t, 0, true)
	code := ExitCode(f.Cmd.Wait())
	if f.err != io.EOF && code == 0 {
		t.Errorf("%s exited 0 but its output does not end cleanly: %v", f.Cmd.Path, f.err)
	}
	return rest, code
}

// kinds names items for failure messages: frame types, or "line".
func kinds(items []any) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = "line"
		if fr, ok := it.(wire.Frame); ok {
			out[i] = fr.Type()
		}
	}
	return out
}
