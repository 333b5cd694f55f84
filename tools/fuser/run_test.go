package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/clitest"
)

func TestHelpEveryVerb(t *testing.T) {
	clitest.HelpEveryVerb(t, "fuser", &CLI{}, run)
}

func TestVersion(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, cli.ExitOK, run([]string{"version"}, strings.NewReader(""), &out, &errb))
	assert.True(t, strings.HasPrefix(out.String(), "fuser "), out.String())
}

func TestBadFlagIsUsageError(t *testing.T) {
	var out, errb bytes.Buffer
	assert.Equal(t, cli.ExitUsage, run([]string{"--no-such-flag"}, strings.NewReader(""), &out, &errb))
	assert.Contains(t, errb.String(), "no-such-flag")
}
