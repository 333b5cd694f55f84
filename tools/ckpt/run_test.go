package main

import (
	"testing"

	"trainwire.dev/lib/cli/clitest"
)

func TestCLI(t *testing.T) { clitest.Basics(t, "ckpt", &CLI{}, run) }
