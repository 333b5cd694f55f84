package clitest

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStart(t *testing.T) {
	p := Start(t, context.Background(), "/bin/sh", []string{"TW_CLITEST=x"}, strings.NewReader("in\n"),
		"-c", `read l; echo "$l $TW_CLITEST"; echo err >&2; exit 3`)
	if code := ExitCode(p.Cmd.Wait()); code != 3 {
		t.Fatalf("exit %d", code)
	}
	if got := p.Stdout.String(); got != "in x\n" || p.Stdout.Len() != 5 || string(p.Stdout.Bytes()) != got {
		t.Fatalf("stdout %q", got)
	}
	if got := p.Stderr.String(); got != "err\n" {
		t.Fatalf("stderr %q", got)
	}
}

// A process still running when its context ends gets SIGQUIT.
func TestStartQuitsAtDeadline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	p := Start(t, ctx, "/bin/sleep", nil, nil, "60")
	err := p.Cmd.Wait()
	if ws, ok := p.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGQUIT {
		t.Fatalf("sleep past the deadline: %v, %v", err, p.Cmd.ProcessState)
	}
}
