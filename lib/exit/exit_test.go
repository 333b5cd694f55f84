package exit

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCodeOf(t *testing.T) {
	require.Equal(t, OK, CodeOf(nil))
	require.Equal(t, Failure, CodeOf(io.EOF))
	require.Nil(t, WithCode(Peer, nil))
	err := fmt.Errorf("rank 2: %w", WithCode(Peer, io.EOF))
	require.Equal(t, Peer, CodeOf(err))
	require.ErrorIs(t, err, io.EOF)
	bad := BadInputf("frame %d: %w", 3, io.ErrUnexpectedEOF)
	require.Equal(t, BadInput, CodeOf(bad))
	require.EqualError(t, bad, "frame 3: unexpected EOF")
	require.True(t, errors.Is(bad, io.ErrUnexpectedEOF))
}
