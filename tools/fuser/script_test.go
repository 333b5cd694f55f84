package main

import (
	"testing"

	"trainwire.dev/lib/cli/clitest"
)

func TestMain(m *testing.M) { clitest.ScriptMain(m, "fuser", run) }

// TestScripts runs the transcripts in testdata/script: fuser's behaviour
// as a user sees it at the shell.
func TestScripts(t *testing.T) { clitest.Scripts(t, nil) }
