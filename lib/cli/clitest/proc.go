package clitest

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Buffer is a bytes.Buffer that a test may read while a process or a
// logger writes it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Bytes returns a copy of what was written so far.
func (s *Buffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len returns how many bytes were written so far.
func (s *Buffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Proc is a tool running as a real process (one rank of a multi-process
// test), its output readable while it runs.
type Proc struct {
	Cmd            *exec.Cmd
	Stdout, Stderr Buffer
}

// Start starts bin with args under ctx, with env added to this process's
// environment and stdin (nil: none). When ctx ends first, the process gets
// SIGQUIT: the Go runtime writes every goroutine's stack to its stderr,
// which a failure message then shows, so a hang says where each rank
// blocks; one that still runs 5 s later is killed.
func Start(t testing.TB, ctx context.Context, bin string, env []string, stdin io.Reader, args ...string) *Proc {
	t.Helper()
	p := command(ctx, bin, env, args)
	p.Cmd.Stdin = stdin
	p.Cmd.Stdout = &p.Stdout
	p.start(t)
	return p
}

// command is a Proc not yet started: stderr collected, SIGQUIT when ctx
// ends; the caller sets stdin and stdout.
func command(ctx context.Context, bin string, env, args []string) *Proc {
	p := &Proc{Cmd: exec.CommandContext(ctx, bin, args...)}
	p.Cmd.Cancel = func() error { return p.Cmd.Process.Signal(syscall.SIGQUIT) }
	p.Cmd.WaitDelay = 5 * time.Second
	p.Cmd.Env = append(os.Environ(), env...)
	p.Cmd.Stderr = &p.Stderr
	return p
}

func (p *Proc) start(t testing.TB) {
	t.Helper()
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", p.Cmd.Path, err)
	}
}

// Recv returns the next value from ch, or fails the test once ctx is done
// (a hang guard: what names what was awaited).
func Recv[T any](t testing.TB, ctx context.Context, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("%s: nothing within the deadline (hang guard)", what)
		var zero T
		return zero
	}
}
