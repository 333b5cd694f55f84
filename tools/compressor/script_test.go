package main

import (
	"testing"

	"trainwire.dev/lib/cli/clitest"
)

func TestMain(m *testing.M) { clitest.ScriptMain(m, "compressor", run) }

// TestScripts runs the transcripts in testdata/script: compressor's behaviour as
// a user sees it at the shell.
func TestScripts(t *testing.T) { clitest.Scripts(t, nil) }
