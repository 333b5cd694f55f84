package cli_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"trainwire.dev/lib/cli"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"4096": 4096, "1MiB": 1 << 20, "64MB": 64e6, "1G": 1 << 30, "1M": 1 << 20, "2KB": 2000, "1.5K": 1536, "0": 0,
	} {
		got, err := cli.ParseSize(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	for _, in := range []string{"", "-1", "1.5", "abc", "1XB"} {
		_, err := cli.ParseSize(in)
		require.Error(t, err, in)
	}
}
