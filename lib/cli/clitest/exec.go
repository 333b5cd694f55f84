package clitest

import (
	"bytes"
	"errors"
	"os/exec"
	"testing"
)

// ExitCode is the exit status an exec.Cmd's Run or Wait reported in err:
// 0 for nil, the process's code for an *exec.ExitError (−1 when a signal
// ended it), −1 for any other failure.
func ExitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// Run runs cmd with its standard output and error collected and returns
// them with the exit code; a command that cannot be run at all (or was
// killed by a signal) fails t.
func Run(t testing.TB, cmd *exec.Cmd) (stdout []byte, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code = ExitCode(err)
	if code < 0 {
		t.Fatalf("%s: %v\n%s", cmd.Path, err, errb.String())
	}
	return out.Bytes(), errb.String(), code
}
