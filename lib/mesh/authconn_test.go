package mesh_test

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"trainwire.dev/lib/mesh"
)

type authResult struct {
	clientRank int
	clientErr  error
	server     mesh.AuthHello
	serverErr  error
}

func authPair(t *testing.T, clientTok, serverTok string, h mesh.AuthHello, check func(mesh.AuthHello) error) authResult {
	t.Helper()
	c, s := net.Pipe()
	defer c.Close()
	defer s.Close()
	deadline := time.Now().Add(5 * time.Second)
	done := make(chan struct{})
	var res authResult
	go func() {
		defer close(done)
		res.server, res.serverErr = mesh.AuthServer(s, []byte(serverTok), 3, "job", deadline, check)
		if res.serverErr != nil {
			s.Close()
		}
	}()
	res.clientRank, res.clientErr = mesh.AuthClient(c, []byte(clientTok), h, deadline)
	if res.clientErr != nil {
		c.Close()
	}
	<-done
	return res
}

func TestAuthConn(t *testing.T) {
	h := mesh.AuthHello{Kind: "ckpt", Run: "job", From: 5, To: 3, World: 8}
	r := authPair(t, "tok", "tok", h, nil)
	if r.clientErr != nil || r.serverErr != nil || r.clientRank != 3 || r.server != h {
		t.Fatalf("same token: %+v", r)
	}
	// No token on both sides: the public loopback key.
	if r := authPair(t, "", "", h, nil); r.clientErr != nil || r.serverErr != nil {
		t.Fatalf("no token: %+v", r)
	}
	// A client without the token is refused, and knows why.
	r = authPair(t, "wrong", "tok", h, nil)
	if r.clientErr == nil || r.serverErr == nil || !errors.Is(r.clientErr, mesh.ErrAuth) {
		t.Fatalf("wrong token accepted or unexplained: %+v", r)
	}
	if r := authPair(t, "", "tok", h, nil); r.clientErr == nil || r.serverErr == nil {
		t.Fatalf("missing token accepted: %+v", r)
	}
	// check refuses before any proof, and the client sees the reason.
	r = authPair(t, "tok", "tok", h, func(a mesh.AuthHello) error {
		if a.Kind != "other" {
			return fmt.Errorf("want kind other, got %s", a.Kind)
		}
		return nil
	})
	if r.clientErr == nil || !strings.Contains(r.clientErr.Error(), "want kind other") {
		t.Fatalf("check's refusal not relayed: %+v", r)
	}
	// Another run id.
	h2 := h
	h2.Run = "other-job"
	if r := authPair(t, "tok", "tok", h2, nil); r.clientErr == nil || !strings.Contains(r.clientErr.Error(), "run id mismatch") {
		t.Fatalf("other run accepted: %+v", r)
	}
	// The wrong server rank.
	h3 := h
	h3.To = 4
	if r := authPair(t, "tok", "tok", h3, nil); r.clientErr == nil {
		t.Fatalf("wrong rank accepted: %+v", r)
	}
}
