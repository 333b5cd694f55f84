package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Kind is the kind of a straggle message; it is the top byte of the mesh
// tag of every message, so a reader knows what it got before decoding.
type Kind uint8

// Message kinds. Control messages go to the controller (Ack, Done, Fail,
// End, State) or to a worker (Probe, Activate, Stop, Sync); Data carries
// one chunk of a ring step.
const (
	KindProbe    Kind = 1  // controller → worker: reply Ack{round} once you have a gradient
	KindAck      Kind = 2  // worker → controller: I have a gradient for round
	KindActivate Kind = 3  // controller → all: run round (epoch) over Members; Rank is the initiator
	KindData     Kind = 4  // worker → worker: ring chunk (Round, Epoch, Step)
	KindDone     Kind = 5  // worker → controller: round (epoch) finished here; Weight, Loss
	KindFail     Kind = 6  // worker → controller: round (epoch) failed here
	KindStop     Kind = 7  // controller → all: the run is over
	KindSync     Kind = 8  // new controller → all: I took over; send State
	KindState    Kind = 9  // worker → new controller: last round/epoch seen, ended flag
	KindEnd      Kind = 10 // worker → controller: my input ended, nothing pending
	KindProfile  Kind = 11 // worker → controller (rna-h): Weight = my mean iteration time, ms
	KindPush     Kind = 12 // initiator → controller (rna-h): my group's parameters after Round
	maxKind      Kind = 12
)

var kindNames = [...]string{"", "probe", "ack", "activate", "data", "done", "fail", "stop", "sync", "state", "end", "profile", "push"}

func (k Kind) String() string {
	if k >= 1 && k <= maxKind {
		return kindNames[k]
	}
	return fmt.Sprintf("kind %d", uint8(k))
}

// Msg is one straggle message. Fields a kind does not use are zero.
type Msg struct {
	Kind    Kind
	From    int // set by the receiver: the rank it came from
	Round   uint64
	Epoch   uint32
	Step    uint32  // Data: the ring step; Activate and Push: the StepPush bits
	Rank    int32   // initiator (Activate), or a rank the message is about
	Weight  float64 // Σw (Done), ended flag (State: 1)
	Loss    float64 // trainer's loss after the round (Done), NaN if unknown
	Members []int32 // Activate: the ring, in order
	Probes  []int32 // Activate: the round's probe set
	Data    []byte  // Data: the chunk; Activate: parameters to load first (rna-h); Push: parameters (little-endian float32)
}

// Bits of an Activate's Step (rna-h), echoed in the initiator's Push.
const (
	// StepPush: the initiator pushes the group's model after applying
	// the round (every --ps-period rounds of a group).
	StepPush uint32 = 1
	// StepPushBase: the group's first round: the initiator pushes the
	// model the group starts from before applying it.
	StepPushBase uint32 = 2
)

// fixed is the size of the fixed part of an encoded message.
const fixed = 8 + 4 + 4 + 4 + 8 + 8 + 2 + 2

// MaxMembers bounds the member and probe lists of a message.
const MaxMembers = 1 << 16

// Tag returns the mesh tag of a message of kind k.
func Tag(k Kind) uint32 { return uint32(k) << 24 }

// Encode appends m's encoding to b.
func (m *Msg) Encode(b []byte) []byte {
	b = binary.LittleEndian.AppendUint64(b, m.Round)
	b = binary.LittleEndian.AppendUint32(b, m.Epoch)
	b = binary.LittleEndian.AppendUint32(b, m.Step)
	b = binary.LittleEndian.AppendUint32(b, uint32(m.Rank))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Weight))
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(m.Loss))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(m.Members)))
	b = binary.LittleEndian.AppendUint16(b, uint16(len(m.Probes)))
	for _, r := range m.Members {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	for _, r := range m.Probes {
		b = binary.LittleEndian.AppendUint32(b, uint32(r))
	}
	return append(b, m.Data...)
}

// ErrMsg is wrapped by every decoding error.
var ErrMsg = errors.New("malformed straggle message")

// Decode decodes a message of the given tag from a peer. world bounds the
// ranks it may name; Data aliases b.
func Decode(tag uint32, b []byte, world int) (Msg, error) {
	var m Msg
	k := Kind(tag >> 24)
	if k < 1 || k > maxKind || tag&0xffffff != 0 {
		return m, fmt.Errorf("%w: unknown tag %#x", ErrMsg, tag)
	}
	m.Kind = k
	if len(b) < fixed {
		return m, fmt.Errorf("%w: %s message of %d bytes, shorter than its %d-byte header", ErrMsg, k, len(b), fixed)
	}
	m.Round = binary.LittleEndian.Uint64(b[0:])
	m.Epoch = binary.LittleEndian.Uint32(b[8:])
	m.Step = binary.LittleEndian.Uint32(b[12:])
	m.Rank = int32(binary.LittleEndian.Uint32(b[16:]))
	m.Weight = math.Float64frombits(binary.LittleEndian.Uint64(b[20:]))
	m.Loss = math.Float64frombits(binary.LittleEndian.Uint64(b[28:]))
	nm := int(binary.LittleEndian.Uint16(b[36:]))
	np := int(binary.LittleEndian.Uint16(b[38:]))
	rest := b[fixed:]
	if len(rest) < 4*(nm+np) {
		return m, fmt.Errorf("%w: %s message names %d members and %d probes in %d bytes", ErrMsg, k, nm, np, len(rest))
	}
	read := func(n int) ([]int32, error) {
		if n == 0 {
			return nil, nil
		}
		out := make([]int32, n)
		for i := range out {
			r := int32(binary.LittleEndian.Uint32(rest[4*i:]))
			if r < 0 || int(r) >= world {
				return nil, fmt.Errorf("%w: %s message names rank %d in a world of %d", ErrMsg, k, r, world)
			}
			out[i] = r
		}
		rest = rest[4*n:]
		return out, nil
	}
	var err error
	if m.Members, err = read(nm); err != nil {
		return m, err
	}
	if m.Probes, err = read(np); err != nil {
		return m, err
	}
	if k == KindActivate && (m.Rank < 0 || int(m.Rank) >= world || len(m.Members) == 0) {
		return m, fmt.Errorf("%w: activation with initiator %d and %d members", ErrMsg, m.Rank, len(m.Members))
	}
	if k == KindData || k == KindActivate || k == KindPush {
		if len(rest)%4 != 0 {
			return m, fmt.Errorf("%w: data chunk of %d bytes is not whole float32s", ErrMsg, len(rest))
		}
		if len(rest) > 0 {
			m.Data = rest
		}
	} else if len(rest) != 0 {
		return m, fmt.Errorf("%w: %d trailing bytes after a %s message", ErrMsg, len(rest), k)
	}
	return m, nil
}
