package mesh

import (
	"fmt"
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

// TestVerdictKeepsSentinel: a verdict that came over the control wire as
// text still answers errors.Is for ErrDesync and ErrAuth (a rank told of
// another rank's desync sees the same sentinel as the rank that saw it).
func TestVerdictKeepsSentinel(t *testing.T) {
	for _, tc := range []struct {
		reason string
		is     error
	}{
		{fmt.Errorf("%w: expected message #0 with tag 0x21 and 5 bytes, got #0 with tag 0x21 and 4 bytes", ErrDesync).Error(), ErrDesync},
		{fmt.Errorf("%w: wrong job token", ErrAuth).Error(), ErrAuth},
	} {
		e := (&verdict{Rank: 0, Reason: tc.reason, Reporter: 2}).errorFor("recv alltoall", 2)
		require.ErrorIs(t, e, tc.is, tc.reason)
		require.Contains(t, e.Error(), tc.reason)
	}
	e := (&verdict{Rank: 1, Reason: "killed or exited", Reporter: 0}).errorFor("recv", 1)
	require.NotErrorIs(t, e, ErrDesync)
	require.NotErrorIs(t, e, ErrAuth)
}
