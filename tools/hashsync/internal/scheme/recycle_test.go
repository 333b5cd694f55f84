package scheme

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// sizeClass rounds up by at most an eighth, monotonically, and keeps
// small sizes exact.
func TestSizeClass(t *testing.T) {
	prev := 0
	for n := 0; n < 1<<20; n += 1 + n/97 {
		c := sizeClass(n)
		require.GreaterOrEqual(t, c, n)
		require.LessOrEqual(t, c, n+n/8, "n %d", n)
		require.GreaterOrEqual(t, c, prev, "n %d", n)
		prev = c
		if n <= 16 {
			require.Equal(t, n, c)
		}
	}
	require.Equal(t, sizeClass(1_300_000), sizeClass(1_310_000), "neighbouring sizes share a class")
}

// bodies hands out the smallest idle buffer that holds the size asked
// for, keeps at most maxFreeBodies, and never the same buffer twice.
func TestBodies(t *testing.T) {
	var b bodies
	small, big := b.get(100), b.get(1000)
	require.Len(t, small, 100)
	b.put(big)
	b.put(small)
	got := b.get(90)
	require.Same(t, &small[:1][0], &got[:1][0], "the smallest that fits")
	require.Len(t, got, 90)
	got2 := b.get(500)
	require.Same(t, &big[:1][0], &got2[:1][0])
	fresh := b.get(10)
	require.NotSame(t, &got[:1][0], &fresh[:1][0], "a buffer handed out twice")
	for range 2 * maxFreeBodies {
		b.put(make([]byte, 8))
	}
	require.Len(t, b.free, maxFreeBodies)
}
