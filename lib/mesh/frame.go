package mesh

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Control frames (handshakes, rendezvous, heartbeats, aborts) are
//
//	u32 big-endian length n | u8 type | n-1 bytes of body
//
// with JSON bodies where they carry fields. They are small and rare; the
// data plane uses its own 16-byte header (see data.go).
type msgType uint8

const (
	msgHello     msgType = 1  // client → server: hello
	msgChallenge msgType = 2  // server → client: challenge
	msgProof     msgType = 3  // client → server: proof
	msgOK        msgType = 4  // server → client: handshake accepted
	msgError     msgType = 5  // either way: refusal or fatal error, text body
	msgRegister  msgType = 6  // rank → rank 0: registration
	msgTable     msgType = 7  // rank 0 → rank: the table
	msgReady     msgType = 8  // rank → rank 0: my mesh connections are up
	msgGo        msgType = 9  // rank 0 → rank: everyone is ready
	msgHeartbeat msgType = 10 // both ways, empty
	msgReport    msgType = 11 // rank → rank 0: a data operation failed (verdict body)
	msgAbort     msgType = 12 // rank 0 → rank: the job is aborted (verdict body)
	msgBye       msgType = 13 // both ways: normal close
	msgDead      msgType = 14 // rank 0 → rank, tolerant meshes: a rank was dropped (verdict body)
)

func (t msgType) String() string {
	names := [...]string{"", "hello", "challenge", "proof", "ok", "error", "register", "table", "ready", "go", "heartbeat", "report", "abort", "bye", "dead"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("type %d", uint8(t))
}

// maxFrame bounds a control frame before anything is allocated: a table for
// tens of thousands of ranks fits.
const maxFrame = 16 << 20

func writeFrame(w io.Writer, t msgType, body []byte) error {
	buf := make([]byte, 5+len(body))
	binary.BigEndian.PutUint32(buf, uint32(1+len(body)))
	buf[4] = byte(t)
	copy(buf[5:], body)
	_, err := w.Write(buf)
	return err
}

func writeJSON(w io.Writer, t msgType, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeFrame(w, t, body)
}

// maxHandshakeFrame bounds the frames read before the peer has proved
// the token.
const maxHandshakeFrame = 4 << 10

func readFrame(r io.Reader) (msgType, []byte, error) { return readFrameMax(r, maxFrame) }

func readFrameMax(r io.Reader, limit uint32) (msgType, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n == 0 || n > limit {
		return 0, nil, fmt.Errorf("bad control frame length %d (not a trainwire mesh peer?)", n)
	}
	body := make([]byte, n-1)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return msgType(hdr[4]), body, nil
}

// readExpect reads one frame that must be of type want (msgError becomes
// an error carrying the peer's text) and decodes its JSON body into v (if
// v is not nil).
func readExpect(r io.Reader, want msgType, v any) error {
	return readExpectMax(r, want, v, maxFrame)
}

func readExpectMax(r io.Reader, want msgType, v any, limit uint32) error {
	t, body, err := readFrameMax(r, limit)
	if err != nil {
		return err
	}
	if t == msgError {
		return &remoteError{msg: string(body)}
	}
	if t != want {
		return fmt.Errorf("unexpected %v message, want %v", t, want)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("bad %v message: %w", t, err)
		}
	}
	return nil
}

// remoteError is the text of a msgError from the other side.
type remoteError struct{ msg string }

func (e *remoteError) Error() string { return e.msg }
