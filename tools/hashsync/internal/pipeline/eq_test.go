package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestEquations: Eq. 6.1 sums every term; Eq. 6.2 hides each
// communication behind its paired computation, or the computation behind
// it, and drops the input redistribution.
func TestEquations(t *testing.T) {
	ms := time.Millisecond
	s := StageTimes{All2All: 5 * ms, SFP: 2 * ms, FAll2All: 6 * ms, FP: 3 * ms, BP: 4 * ms, AllReduce: 7 * ms, Opt: 1 * ms, BAll2All: 3 * ms, SBP: 2 * ms}
	require.Equal(t, 33*ms, s.Sequential())
	require.Equal(t, (6+4+7+1)*ms, s.Pipelined())
	s.FAll2All, s.AllReduce = 1*ms, 1*ms
	require.Equal(t, (5+4+2+1)*ms, s.Pipelined())
}
