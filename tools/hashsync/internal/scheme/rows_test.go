package scheme

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCopyRow checks copyRow against copy at every width around the
// 16-float fast path, into a destination whose neighbours must stay as
// they were.
func TestCopyRow(t *testing.T) {
	for w := 1; w <= 33; w++ {
		src := make([]float32, w)
		for i := range src {
			src[i] = float32(i + 1)
		}
		dst := make([]float32, w+2)
		dst[0], dst[w+1] = -1, -2
		copyRow(dst[1:w+1], src)
		require.Equal(t, float32(-1), dst[0], "width %d", w)
		require.Equal(t, float32(-2), dst[w+1], "width %d", w)
		require.Equal(t, src, dst[1:w+1], "width %d", w)
	}
}
