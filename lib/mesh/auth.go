package mesh

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"net"
	"strconv"
	"time"
)

// protoVersion is the mesh protocol version; both sides of every
// connection must speak the same one.
const protoVersion = 1

// noTokenKey is the HMAC key when the job has no token. It authenticates
// nothing (everyone knows it) and is only allowed on loopback; it still
// keeps strays and other jobs (different run id) out.
var noTokenKey = []byte("trainwire-mesh: no token (loopback only)")

// Connection kinds, bound into the MACs.
const (
	kindRendezvous = "rendezvous"
	kindData       = "data"
)

// hello is the first message on every connection, client to server.
type hello struct {
	Proto int    `json:"proto"`
	Kind  string `json:"kind"`
	Run   string `json:"run"`
	From  int    `json:"from"`
	To    int    `json:"to"`
	World int    `json:"world"`
	Nonce []byte `json:"nonce"`
}

// challenge is the server's answer: its rank, its nonce, and its proof.
type challenge struct {
	Rank  int    `json:"rank"`
	Nonce []byte `json:"nonce"`
	MAC   []byte `json:"mac"`
}

// proof is the client's proof.
type proof struct {
	MAC []byte `json:"mac"`
}

// computeMAC is HMAC-SHA256 over the role and every field both sides
// agree on, each length-prefixed: the server's and client's MACs differ by
// role, and both bind the two nonces, the run id, the kind and both ranks,
// so no transcript can be replayed on another connection or reflected.
func computeMAC(key []byte, role string, h *hello, serverRank int, serverNonce []byte) []byte {
	m := hmac.New(sha256.New, key)
	put := func(b []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		m.Write(l[:])
		m.Write(b)
	}
	put([]byte("trainwire-mesh-v1"))
	put([]byte(role))
	put([]byte(h.Run))
	put([]byte(h.Kind))
	put([]byte(strconv.Itoa(h.From)))
	put([]byte(strconv.Itoa(serverRank)))
	put([]byte(strconv.Itoa(h.World)))
	put(h.Nonce)
	put(serverNonce)
	return m.Sum(nil)
}

func nonce() ([]byte, error) {
	b := make([]byte, 32)
	_, err := rand.Read(b)
	return b, err
}

// clientHandshake runs the client side on conn: hello, check the server's
// MAC, send ours, wait for the verdict. It returns the server's rank.
func clientHandshake(conn net.Conn, key []byte, h hello, deadline time.Time) (int, error) {
	addr := conn.RemoteAddr().String()
	_ = conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	nc, err := nonce()
	if err != nil {
		return -1, err
	}
	h.Proto, h.Nonce = protoVersion, nc
	if err := writeJSON(conn, msgHello, &h); err != nil {
		return -1, err
	}
	var ch challenge
	if err := readExpectMax(conn, msgChallenge, &ch, maxHandshakeFrame); err != nil {
		if re, ok := err.(*remoteError); ok {
			return -1, fmt.Errorf("refused by %s: %s", addr, re.msg)
		}
		return -1, err
	}
	if h.To >= 0 && ch.Rank != h.To {
		return -1, fmt.Errorf("%s is rank %d, expected rank %d (stale table or another job on that address?)", addr, ch.Rank, h.To)
	}
	if !hmac.Equal(ch.MAC, computeMAC(key, "server", &h, ch.Rank, ch.Nonce)) {
		return -1, fmt.Errorf("%w: %s does not prove the job token (different --token/TRAINWIRE_TOKEN, or not a trainwire peer)", ErrAuth, addr)
	}
	if err := writeJSON(conn, msgProof, &proof{MAC: computeMAC(key, "client", &h, ch.Rank, ch.Nonce)}); err != nil {
		return -1, err
	}
	if err := readExpectMax(conn, msgOK, nil, maxHandshakeFrame); err != nil {
		if re, ok := err.(*remoteError); ok {
			return -1, fmt.Errorf("%w: %s refused us: %s (different --token/TRAINWIRE_TOKEN?)", ErrAuth, addr, re.msg)
		}
		return -1, err
	}
	return ch.Rank, nil
}

// serverHandshake runs the server side on conn for a server of rank me.
// check vets the hello (kind, ranks, world) before any proof is exchanged;
// its error is sent to the client as the refusal. On any failure the
// client gets an explanation (msgError) where that is possible; the caller
// closes conn and logs the error.
func serverHandshake(conn net.Conn, key []byte, me int, run string, deadline time.Time, check func(*hello) error) (*hello, error) {
	_ = conn.SetDeadline(deadline)
	defer conn.SetDeadline(time.Time{})
	refuse := func(err error) error {
		_ = writeFrame(conn, msgError, []byte(err.Error()))
		return err
	}
	var h hello
	if err := readExpectMax(conn, msgHello, &h, maxHandshakeFrame); err != nil {
		return nil, fmt.Errorf("bad hello: %w", err)
	}
	if h.Proto != protoVersion {
		return nil, refuse(fmt.Errorf("protocol version mismatch: rank %d speaks %d, client speaks %d (mixed trainwire versions?)", me, protoVersion, h.Proto))
	}
	if h.Run != run {
		return nil, refuse(fmt.Errorf("run id mismatch: rank %d is in run %q, client in run %q (another job on this port?)", me, run, h.Run))
	}
	if len(h.Nonce) != 32 {
		return nil, refuse(fmt.Errorf("bad client nonce"))
	}
	if err := check(&h); err != nil {
		return nil, refuse(err)
	}
	ns, err := nonce()
	if err != nil {
		return nil, err
	}
	if err := writeJSON(conn, msgChallenge, &challenge{Rank: me, Nonce: ns, MAC: computeMAC(key, "server", &h, me, ns)}); err != nil {
		return nil, err
	}
	var p proof
	if err := readExpectMax(conn, msgProof, &p, maxHandshakeFrame); err != nil {
		// The client hung up: it found our MAC wrong (different token).
		return nil, fmt.Errorf("%w: client (claiming rank %d) gave up after our challenge (it has a different job token?): %v", ErrAuth, h.From, err)
	}
	if !hmac.Equal(p.MAC, computeMAC(key, "client", &h, me, ns)) {
		return nil, refuse(fmt.Errorf("%w: wrong job token", ErrAuth))
	}
	if err := writeFrame(conn, msgOK, nil); err != nil {
		return nil, err
	}
	return &h, nil
}
