package scheme

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/mesh"
)

// metaLen is the size of the small message that announces every payload:
// u32 format | u32 reserved | u64 count (rows, blocks, …). Meta messages
// are counted under their own phase, "meta", so the payload phases hold
// exactly the bytes of the closed forms.
const metaLen = 16

// Payload formats named in meta messages.
const (
	fmtCOO    uint32 = 1 // u32 indices, then values
	fmtBitmap uint32 = 2 // hash bitmap over the server's set, then values
	fmtDense  uint32 = 3 // every value
	fmtBlocks uint32 = 4 // u32 block ids, then whole blocks
	fmtName   uint32 = 5 // a tensor descriptor: the name's bytes
	fmtEnd    uint32 = 6 // end of this rank's stream
	fmtHello  uint32 = 7 // the configuration
)

// message is one payload with its announced format and count. A message
// with a head sends it as its own mesh message before the body, so the
// receiver can act on the head (say, the row indices) while the body (the
// values) is still on the wire.
type message struct {
	fmt  uint32
	n    uint64
	head []byte
	body []byte
	// chunks, when set, cut body into messages of these lengths (empty
	// ones are not sent), and ready(c) returns once chunk c's bytes are
	// written: the sender streams a body that is still being produced.
	chunks []int
	ready  func(c int)
}

// Operation codes in message tags (bits 16–23; bits 24–31 are 0x7A so the
// tags never collide with lib/collective's).
const (
	opHello = iota + 1
	opDesc
	opPush
	opPull
	opHC
	opIntraRS
	opInterAG
	opIntraAG
	opProfile
	opCounts
	opTrial
	opPullHead // receive buffers only: pull heads travel under opPull's tag
)

func (s *Syncer) tag(op int) uint32 { return 0x7A000000 | uint32(op)<<16 | s.seq&0xFFFF }

// bodyLenFunc returns the payload length a peer's (format, count) implies,
// after checking both against what this rank can accept.
type bodyLenFunc func(peer int, f uint32, n uint64) (int, error)

// exchange sends out(p) to every rank in to and receives one message from
// every rank in from, all concurrently (a goroutine per direction and
// peer, so an all-to-all cannot deadlock on full socket buffers). Every
// received length is checked by bodyLen before anything is allocated. The
// result is indexed by rank. A malformed message aborts the job (the
// others must not wait for a rank that gave up), naming the sender.
func (s *Syncer) exchange(ph *mesh.Phase, op int, to []int, out func(p int) message, from []int, bodyLen bodyLenFunc) ([]message, error) {
	return s.exchangeThen(ph, op, to, out, from, bodyLen, nil, nil)
}

// exchangeThen is exchange with onRecv run on each received message in
// its receiving goroutine, as soon as it is in: decoding one peer's
// message overlaps the transfer of the others'. An error from onRecv is a
// malformed message from that peer. reuse, when not nil, holds a receive
// buffer per rank, grown as needed and kept for the next call: the bodies
// received then alias it, so the caller must be done with them before it
// passes reuse again.
func (s *Syncer) exchangeThen(ph *mesh.Phase, op int, to []int, out func(p int) message, from []int, bodyLen bodyLenFunc, onRecv func(p int, m message) error, reuse [][]byte) ([]message, error) {
	lens := func(p int, f uint32, n uint64) (int, int, error) {
		l, err := bodyLen(p, f, n)
		return 0, l, err
	}
	return s.exchangeSplit(ph, op, to, out, from, lens, nil, onRecv, nil, reuse, nil, nil)
}

// splitLenFunc returns the head and body lengths a peer's (format, count)
// implies, after checking both against what this rank can accept.
type splitLenFunc func(peer int, f uint32, n uint64) (head, body int, err error)

// exchangeSplit is exchangeThen for messages in two parts: each peer's
// head is received (into reuseHead's buffer) and handed to onHead before
// its body is received and handed to onBody, both in that peer's
// receiving goroutine. Heads and bodies travel as separate mesh messages
// in that order on each connection. With recvChunks, the body arrives in
// pieces of the lengths recvChunks returns (called after onHead; they
// must add up to the body's length, and the sender's message.chunks must
// say the same), each handed to onChunk as it lands.
func (s *Syncer) exchangeSplit(ph *mesh.Phase, op int, to []int, out func(p int) message, from []int, lens splitLenFunc, onHead, onBody func(p int, m message) error, reuseHead, reuseBody [][]byte, recvChunks func(p int, m message) []int, onChunk func(p, c int, b []byte) error) ([]message, error) {
	tag := s.tag(op)
	res := make([]message, s.n)
	errs := make([]error, 2*s.n)
	var wg sync.WaitGroup
	for _, p := range to {
		wg.Go(func() {
			m := out(p)
			var hdr [metaLen]byte
			binary.LittleEndian.PutUint32(hdr[0:], m.fmt)
			binary.LittleEndian.PutUint64(hdr[8:], m.n)
			if err := s.meta.Send(p, tag, hdr[:]); err != nil {
				errs[p] = err
				return
			}
			if len(m.head) > 0 {
				if err := ph.Send(p, tag, m.head); err != nil {
					errs[p] = err
					return
				}
			}
			if m.chunks != nil {
				off := 0
				for c, l := range m.chunks {
					if l > 0 {
						m.ready(c)
						if err := ph.Send(p, tag, m.body[off:off+l]); err != nil {
							errs[p] = err
							return
						}
					}
					off += l
				}
				return
			}
			if len(m.body) > 0 {
				errs[p] = ph.Send(p, tag, m.body)
			}
		})
	}
	// buf returns a receive buffer of l bytes, from reuse when given.
	buf := func(reuse [][]byte, p, l int) []byte {
		if reuse == nil {
			return make([]byte, l)
		}
		if cap(reuse[p]) < l {
			reuse[p] = make([]byte, l+l/8)
		}
		return reuse[p][:l]
	}
	for _, p := range from {
		wg.Go(func() {
			bad := func(err error) {
				err = &BadPeerError{Rank: p, Phase: ph.Name(), Err: err}
				s.m.Abort(err)
				errs[s.n+p] = err
			}
			var hdr [metaLen]byte
			if err := s.meta.Recv(p, tag, hdr[:]); err != nil {
				errs[s.n+p] = err
				return
			}
			m := message{fmt: binary.LittleEndian.Uint32(hdr[0:]), n: binary.LittleEndian.Uint64(hdr[8:])}
			hl, bl, err := lens(p, m.fmt, m.n)
			if err == nil && (int64(hl) > s.cfg.MaxMessage || int64(bl) > s.cfg.MaxMessage) {
				err = fmt.Errorf("%d-byte message over the %d-byte limit (--max-message)", max(hl, bl), s.cfg.MaxMessage)
			}
			if err != nil {
				bad(err)
				return
			}
			if hl > 0 {
				m.head = buf(reuseHead, p, hl)
				if err := ph.Recv(p, tag, m.head); err != nil {
					errs[s.n+p] = err
					return
				}
			}
			if onHead != nil {
				if err := onHead(p, m); err != nil {
					bad(err)
					return
				}
			}
			if bl > 0 {
				m.body = buf(reuseBody, p, bl)
			}
			if recvChunks != nil {
				off := 0
				for c, l := range recvChunks(p, m) {
					if l > 0 {
						if off+l > bl {
							bad(fmt.Errorf("chunk %d overruns the %d-byte body", c, bl))
							return
						}
						if err := ph.Recv(p, tag, m.body[off:off+l]); err != nil {
							errs[s.n+p] = err
							return
						}
					}
					if err := onChunk(p, c, m.body[off:off+l]); err != nil {
						bad(err)
						return
					}
					off += l
				}
			} else if bl > 0 {
				if err := ph.Recv(p, tag, m.body); err != nil {
					errs[s.n+p] = err
					return
				}
			}
			res[p] = m
			if onBody != nil {
				if err := onBody(p, m); err != nil {
					bad(err)
				}
			}
		})
	}
	wg.Wait()
	return res, firstError(errs)
}

// firstError prefers the error that names a failed peer (the job-wide
// verdict) over the side effects of the abort on other connections.
func firstError(errs []error) error {
	var first error
	for _, e := range errs {
		if e == nil {
			continue
		}
		var bp *BadPeerError
		if errors.As(e, &bp) {
			return e
		}
		if first == nil {
			first = e
		}
	}
	if first == nil {
		return nil
	}
	for _, e := range errs {
		var pe *mesh.PeerError
		if e != nil && errors.As(e, &pe) {
			return e
		}
	}
	return first
}

// BadPeerError is a malformed message from a peer.
type BadPeerError struct {
	Rank  int
	Phase string
	Err   error
}

func (e *BadPeerError) Error() string {
	return fmt.Sprintf("bad %s message from rank %d: %v", e.Phase, e.Rank, e.Err)
}

// Unwrap returns the cause.
func (e *BadPeerError) Unwrap() error { return e.Err }

// ExitCode is 3: a peer failed (it sent what no correct rank sends).
func (e *BadPeerError) ExitCode() int { return exit.Peer }

// others returns every rank but r.
func others(n, r int) []int {
	o := make([]int, 0, n-1)
	for p := range n {
		if p != r {
			o = append(o, p)
		}
	}
	return o
}
