package clitest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// ScriptMain is the TestMain of a tool whose CLI tests are transcripts
// (testdata/script/*.txtar, the Go distribution's cmd/ style): the scripts
// call the tool by its name, and the call runs the tool's run in a child
// process of the test binary, with real stdin, stdout, stderr and exit
// code. It calls m.Run itself.
func ScriptMain(m *testing.M, tool string, run RunFunc) {
	testscript.Main(m, map[string]func(){
		tool: func() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) },
	})
}

// Scripts runs every testdata/script/*.txtar transcript of the package's
// tool (see [ScriptMain]). A script runs in its own temporary directory
// holding its txtar files; the variable TESTDATA names the package's
// testdata directory, for fixtures shared between scripts. Besides
// testscript's commands, `exits N CMD ARGS...` runs CMD like exec and
// requires exit code N (the tools' documented codes: 2 bad input, 3 a
// peer, 80 flags, ...). conds are the package's own conditions ([cuda],
// say), beside testscript's built-in ones.
func Scripts(t *testing.T, conds map[string]bool) {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("TESTDATA", dir+"/testdata")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){"exits": exits},
		Condition: func(cond string) (bool, error) {
			v, ok := conds[cond]
			if !ok {
				return false, fmt.Errorf("unknown condition %q", cond)
			}
			return v, nil
		},
	})
}

// exits is the transcripts' `exits N CMD ARGS...`: CMD must exit with N.
func exits(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exits CODE COMMAND [ARGS...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exits: code %q: %v", args[0], err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exits: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}
