package mesh

import (
	"bytes"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// socketPair returns two connected Unix stream sockets.
func socketPair(t *testing.T) (*net.UnixConn, net.Conn) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0]).(*net.UnixConn), conn(fds[1])
}

// FuzzControlFrame feeds arbitrary bytes to the control-frame decoder as
// every message a peer sends: it must return an error or a value, never
// panic, and never allocate past its limit.
func FuzzControlFrame(f *testing.F) {
	var b bytes.Buffer
	_ = writeJSON(&b, msgRegister, &register{})
	f.Add(b.Bytes())
	b.Reset()
	_ = writeJSON(&b, msgTable, &tableMsg{})
	f.Add(b.Bytes())
	b.Reset()
	_ = writeJSON(&b, msgAbort, &verdict{Rank: 2, Reason: "killed"})
	f.Add(b.Bytes())
	f.Add([]byte{0, 0, 0, 1, byte(msgHeartbeat)})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		var reg register
		_ = readExpectMax(r, msgRegister, &reg, maxHandshakeFrame)
		var tab tableMsg
		_ = readExpectMax(bytes.NewReader(data), msgTable, &tab, maxHandshakeFrame)
		var v verdict
		_ = readExpectMax(bytes.NewReader(data), msgAbort, &v, maxHandshakeFrame)
		var h hello
		_ = readExpectMax(bytes.NewReader(data), msgHello, &h, maxHandshakeFrame)
	})
}

// FuzzServerHandshake plays an arbitrary client against the server side of
// the handshake: whatever the bytes, the server must refuse (an error)
// rather than accept, panic or hang, since the client cannot know the
// token's MAC.
func FuzzServerHandshake(f *testing.F) {
	var b bytes.Buffer
	_ = writeJSON(&b, msgHello, &hello{Proto: protoVersion, Kind: "data", Run: "r", From: 1, To: 0, World: 2, Nonce: make([]byte, 32)})
	_ = writeJSON(&b, msgProof, &proof{MAC: make([]byte, 32)})
	f.Add(b.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		client, server := socketPair(t)
		defer client.Close()
		go func() {
			// Kernel buffers take the whole input; the half-close then
			// gives the server EOF instead of a wait for its deadline.
			_, _ = client.Write(data)
			_ = client.CloseWrite()
			_, _ = io.Copy(io.Discard, client)
		}()
		h, err := serverHandshake(server, []byte("token"), 0, "r", time.Now().Add(200*time.Millisecond),
			func(*hello) error { return nil })
		server.Close()
		if err == nil {
			t.Fatalf("handshake accepted a client without the token: %+v", h)
		}
	})
}
