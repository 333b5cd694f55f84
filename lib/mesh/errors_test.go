package mesh

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A deadline that is not --timeout's (a dial within --connect-timeout) is
// not described as --timeout's: "could not reach rank 0 within 5s: no
// progress for 1m0s" contradicted itself.
func TestDescribeTimeoutNamesTheRightDeadline(t *testing.T) {
	require.Contains(t, describe(os.ErrDeadlineExceeded, time.Minute), "no progress for 1m0s")
	got := describe(os.ErrDeadlineExceeded, 0)
	require.NotContains(t, got, "no progress")
	require.NotContains(t, got, "--timeout")
	require.Contains(t, got, "timed out")
}
