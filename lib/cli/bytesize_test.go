package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseByteSize(t *testing.T) {
	for s, want := range map[string]int64{"4096": 4096, "64KB": 64000, "1MiB": 1 << 20, "1M": 1 << 20,
		"2G": 2 << 30, "1.5KiB": 1536, "0": 0, "7B": 7, " 3 mib ": 3 << 20} {
		got, err := parseByteSize(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, got, s)
	}
	for _, s := range []string{"", "-1", "abc", "1.3B", "1e30", "MB"} {
		_, err := parseByteSize(s)
		assert.Error(t, err, s)
	}
}
