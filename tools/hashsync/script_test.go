package main

import (
	"errors"
	"testing"

	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/gpu"
)

func TestMain(m *testing.M) { clitest.ScriptMain(m, "hashsync", run) }

// TestScripts runs the transcripts in testdata/script: hashsync's
// behaviour as a user sees it at the shell. [cuda] holds in builds with a
// CUDA device API (-tags cuda or cudaemu).
func TestScripts(t *testing.T) {
	d, err := gpu.Open(0)
	if d != nil {
		d.Close()
	}
	clitest.Scripts(t, map[string]bool{"cuda": !errors.Is(err, gpu.ErrNoCUDA)})
}
