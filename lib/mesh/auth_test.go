package mesh

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type hsResult struct {
	serverRank int
	clientErr  error
	hello      *hello
	serverErr  error
}

// handshake runs both sides over an in-memory pipe.
func handshake(t *testing.T, clientKey, serverKey []byte, h hello, serverRun string) hsResult {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	deadline := time.Now().Add(5 * time.Second)
	done := make(chan hsResult, 1)
	go func() {
		hh, err := serverHandshake(s, serverKey, 3, serverRun, deadline, func(h *hello) error {
			if h.To != 3 {
				return errors.New("not for me")
			}
			return nil
		})
		if err != nil {
			s.Close() // as the accept loop does
		}
		done <- hsResult{hello: hh, serverErr: err}
	}()
	rank, err := clientHandshake(c, clientKey, h, deadline)
	if err != nil {
		c.Close()
	}
	res := <-done
	res.serverRank, res.clientErr = rank, err
	return res
}

func TestHandshake(t *testing.T) {
	h := hello{Kind: kindData, Run: "job", From: 5, To: 3, World: 8}
	res := handshake(t, []byte("k"), []byte("k"), h, "job")
	require.NoError(t, res.clientErr)
	require.NoError(t, res.serverErr)
	require.Equal(t, 3, res.serverRank)
	require.Equal(t, 5, res.hello.From)
	require.Len(t, res.hello.Nonce, 32)
}

func TestHandshakeWrongKeyClient(t *testing.T) {
	// The client has the wrong key: it finds the server's MAC wrong and
	// hangs up; both sides fail with ErrAuth.
	res := handshake(t, []byte("wrong"), []byte("right"), hello{Kind: kindData, Run: "job", From: 5, To: 3, World: 8}, "job")
	require.ErrorIs(t, res.clientErr, ErrAuth)
	require.ErrorIs(t, res.serverErr, ErrAuth)
	require.Contains(t, res.clientErr.Error(), "token")
}

func TestHandshakeRunMismatch(t *testing.T) {
	res := handshake(t, []byte("k"), []byte("k"), hello{Kind: kindData, Run: "job-a", From: 5, To: 3, World: 8}, "job-b")
	require.Error(t, res.clientErr)
	require.Contains(t, res.clientErr.Error(), "run id mismatch")
	require.Error(t, res.serverErr)
}

func TestHandshakeCheckRefusal(t *testing.T) {
	res := handshake(t, []byte("k"), []byte("k"), hello{Kind: kindData, Run: "job", From: 5, To: 4, World: 8}, "job")
	require.ErrorContains(t, res.clientErr, "not for me")
}

func TestMACBindsEverything(t *testing.T) {
	h := hello{Kind: kindData, Run: "job", From: 5, To: 3, World: 8, Nonce: make([]byte, 32)}
	ns := make([]byte, 32)
	base := computeMAC([]byte("k"), "server", &h, 3, ns)
	require.NotEqual(t, base, computeMAC([]byte("k"), "client", &h, 3, ns), "role")
	require.NotEqual(t, base, computeMAC([]byte("k2"), "server", &h, 3, ns), "key")
	require.NotEqual(t, base, computeMAC([]byte("k"), "server", &h, 2, ns), "server rank")
	ns2 := append([]byte(nil), ns...)
	ns2[0] = 1
	require.NotEqual(t, base, computeMAC([]byte("k"), "server", &h, 3, ns2), "server nonce")
	for _, mod := range []func(*hello){
		func(h *hello) { h.Kind = kindRendezvous },
		func(h *hello) { h.Run = "job2" },
		func(h *hello) { h.From = 6 },
		func(h *hello) { h.World = 9 },
		func(h *hello) { h.Nonce = append([]byte{1}, h.Nonce[1:]...) },
	} {
		h2 := h
		mod(&h2)
		require.NotEqual(t, base, computeMAC([]byte("k"), "server", &h2, 3, ns))
	}
}

func TestReadFrameBounds(t *testing.T) {
	c, s := net.Pipe()
	defer c.Close()
	go func() {
		_, _ = s.Write([]byte{0xff, 0xff, 0xff, 0xff, 1})
		s.Close()
	}()
	_, _, err := readFrame(c)
	require.ErrorContains(t, err, "bad control frame length")
}
