// Package clitest holds test helpers for trainwire tools' command lines.
package clitest

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	"trainwire.dev/lib/wire"
)

// RunFunc is a tool's run: main without the exit.
type RunFunc func(args []string, stdin io.Reader, stdout, stderr io.Writer) int

// Verbs returns the command paths of a kong CLI struct, e.g. ["dump"],
// ["ckpt", "save"], by walking its model.
func Verbs(t testing.TB, cli any) [][]string {
	t.Helper()
	p, err := kong.New(cli)
	if err != nil {
		t.Fatalf("kong.New: %v", err)
	}
	var out [][]string
	var walk func(n *kong.Node, path []string)
	walk = func(n *kong.Node, path []string) {
		for _, c := range n.Children {
			if c.Type != kong.CommandNode || c.Hidden {
				continue
			}
			p := append(append([]string{}, path...), c.Name)
			out = append(out, p)
			walk(c, p)
		}
	}
	walk(p.Model.Node, nil)
	return out
}

// HelpEveryVerb runs "<verb> --help" for every verb of cli through run and
// checks each exits 0 with a usage line naming the verb and some help text.
func HelpEveryVerb(t *testing.T, tool string, cli any, run RunFunc) {
	t.Helper()
	verbs := Verbs(t, cli)
	if len(verbs) == 0 {
		t.Fatal("no verbs")
	}
	for _, v := range append([][]string{{}}, verbs...) {
		var out, errb bytes.Buffer
		code := run(append(v, "--help"), strings.NewReader(""), &out, &errb)
		name := strings.Join(append([]string{tool}, v...), " ")
		if code != 0 {
			t.Errorf("%s --help: exit %d, stderr %q", name, code, errb.String())
			continue
		}
		if !strings.Contains(out.String(), "Usage: "+name) {
			t.Errorf("%s --help: no usage line in %q", name, out.String())
		}
	}
}

// Basics checks what every trainwire tool must do: --help on every verb,
// a version line starting with the tool's name (the version verb and
// --version), and exit code 80 with the
// flag named for an unknown flag, and the environment-variable rule on
// every flag (EnvRule).
func Basics(t *testing.T, tool string, cli any, run RunFunc) {
	t.Run("help", func(t *testing.T) { HelpEveryVerb(t, tool, cli, run) })
	t.Run("version", func(t *testing.T) {
		for _, args := range [][]string{{"version"}, {"--version"}} {
			var out, errb bytes.Buffer
			if code := run(args, strings.NewReader(""), &out, &errb); code != 0 {
				t.Fatalf("%s: exit %d: %s", args[0], code, errb.String())
			}
			if !strings.HasPrefix(out.String(), tool+" ") {
				t.Errorf("%s printed %q, want it to start with %q", args[0], out.String(), tool+" ")
			}
		}
	})
	t.Run("env", func(t *testing.T) { EnvRule(t, tool, cli, run) })
	t.Run("bad flag", func(t *testing.T) {
		// Usage and errors go to stderr: stdout may be the next tool's
		// input. Once at the top, once on every verb.
		for _, v := range append([][]string{{}}, Verbs(t, cli)...) {
			var out, errb bytes.Buffer
			name := strings.Join(append([]string{tool}, v...), " ")
			if code := run(append(v, "--no-such-flag"), strings.NewReader(""), &out, &errb); code != 80 {
				t.Errorf("%s --no-such-flag: exit %d, want 80", name, code)
			}
			if !strings.Contains(errb.String(), "no-such-flag") {
				t.Errorf("%s --no-such-flag: stderr %q does not name it", name, errb.String())
			}
			if !strings.Contains(errb.String(), "Usage: "+name) {
				t.Errorf("%s --no-such-flag: no usage on stderr: %q", name, errb.String())
			}
			if out.Len() != 0 {
				t.Errorf("%s --no-such-flag: wrote %q to stdout; usage and errors go to stderr", name, out.String())
			}
		}
	})
}

// Stream writes frames as one trainwire stream (header, frames, end).
func Stream(t testing.TB, frames ...wire.Frame) []byte {
	t.Helper()
	var b bytes.Buffer
	w := wire.NewWriter(&b, "test")
	for _, f := range frames {
		if err := w.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}
