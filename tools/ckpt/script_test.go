package main

import (
	"testing"

	"trainwire.dev/lib/cli/clitest"
)

func TestMain(m *testing.M) { clitest.ScriptMain(m, "ckpt", run) }

// TestScripts runs the transcripts in testdata/script: ckpt's behaviour as
// a user sees it at the shell.
func TestScripts(t *testing.T) { clitest.Scripts(t, nil) }
