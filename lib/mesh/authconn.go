package mesh

import (
	"net"
	"time"
)

// AuthHello is what the client of an authenticated connection claims
// about itself; the MACs of the handshake bind every field.
type AuthHello struct {
	// Kind names the connection's purpose (e.g. "ckpt"); a connection of
	// one kind cannot be replayed as another.
	Kind string
	// Run is the job's run id; both sides must agree.
	Run string
	// From is the client's rank, To the rank it wants (-1: any), World the
	// job's size as the client knows it.
	From, To, World int
}

// AuthKey is the HMAC key for token: the token itself, or, when it is
// empty, the fixed public key the mesh uses on loopback (it authenticates
// nothing but keeps strays and other runs out).
func AuthKey(token []byte) []byte {
	if len(token) == 0 {
		return noTokenKey
	}
	return token
}

// AuthClient runs the client side of the mesh's HMAC-SHA256
// challenge-response on conn, for tools that keep their own connections
// (ckpt's agents, which must outlive dead peers): it proves the job token
// and checks that the server knows it too, both bound to h and to fresh
// nonces. It returns the server's rank. Every read and write is bounded
// by deadline. An error wrapping ErrAuth means a token mismatch.
func AuthClient(conn net.Conn, token []byte, h AuthHello, deadline time.Time) (int, error) {
	return clientHandshake(conn, AuthKey(token), hello{Kind: h.Kind, Run: h.Run, From: h.From, To: h.To, World: h.World}, deadline)
}

// AuthServer runs the server side of the handshake on conn for a server of
// rank me in run. check vets the client's claims before any proof is
// exchanged; its error is sent to the client as the refusal. On success it
// returns what the client proved it claims.
func AuthServer(conn net.Conn, token []byte, me int, run string, deadline time.Time, check func(AuthHello) error) (AuthHello, error) {
	h, err := serverHandshake(conn, AuthKey(token), me, run, deadline, func(h *hello) error {
		if check == nil {
			return nil
		}
		return check(AuthHello{Kind: h.Kind, Run: h.Run, From: h.From, To: h.To, World: h.World})
	})
	if err != nil {
		return AuthHello{}, err
	}
	return AuthHello{Kind: h.Kind, Run: h.Run, From: h.From, To: h.To, World: h.World}, nil
}
