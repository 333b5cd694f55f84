package cli

import (
	"bytes"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestProgressOnTerminalOnly: the bar is drawn on a terminal (a
// pseudo-terminal here) and never on a pipe (issue 24 item 15).
func TestProgressOnTerminalOnly(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptmx.Close()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(ptmx) // ends when tty is closed
		got <- string(b)
	}()
	drive(NewProgress(tty, ProgressOptions{Label: "work", Total: 1000, Bytes: true}))
	tty.Close()
	select {
	case s := <-got:
		if !strings.Contains(s, "work") || !strings.Contains(s, "100%") {
			t.Errorf("no bar on the terminal: %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading the terminal hung")
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	drive(NewProgress(w, ProgressOptions{Label: "work", Total: 1000}))
	w.Close()
	b, _ := io.ReadAll(r)
	if len(b) != 0 {
		t.Errorf("a bar on a pipe: %q", b)
	}
	var buf bytes.Buffer
	drive(NewProgress(&buf, ProgressOptions{Label: "work", Total: 10, Mode: "always"}))
	if !strings.Contains(buf.String(), "work") {
		t.Errorf("--progress always drew nothing: %q", buf.String())
	}
	var p *Progress
	drive(p) // a nil Progress does nothing
}

func drive(p *Progress) {
	p.SetTotal(1000)
	for i := 0; i < 10; i++ {
		p.Add(100)
	}
	p.Set(1000)
	p.Done()
}
