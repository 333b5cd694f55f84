package serve

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"trainwire.dev/lib/mesh"
)

// Error codes of a failed reply.
const (
	CodeBadRequest = "bad_request" // this client's request is malformed or names what is not there
	CodeRejected   = "rejected"    // another rank's request for the same collective was refused
	CodeMismatch   = "mismatch"    // the ranks' requests disagree (step, tensors, sizes)
	CodePeer       = "peer_failed" // a rank died, hung past the deadline, or aborted the job
	CodeShutdown   = "shutdown"    // the sidecar is stopping (SIGTERM, SIGINT)
	CodeFailed     = "failed"      // anything else
)

// Reply answers one request (docs/serve.md, "Replies").
type Reply struct {
	ID int64
	OK bool
	// Code, Error, Field and Rank describe a failure: Field the request's
	// field at fault (""), Rank the rank held responsible (-1 if none).
	Code, Error, Field string
	Rank               int64
	// Size is an attached segment's size in bytes (attach only).
	Size int64
	// Data holds one entry per tensor of a sync: an inline tensor's
	// result, empty for a tensor in a segment (its result is in place).
	Data [][]byte
	// Info holds a tool's figures about a sync beside its data (straggle:
	// round, rounds, contributors); nil for the others, whose replies then
	// carry no "info" key.
	Info map[string]int64
}

// AppendReply appends r's message body, keys in order: id, ok, code,
// error, field, rank, size, data, and info (its keys in order) when r
// has any.
func AppendReply(b []byte, r *Reply) []byte {
	if len(r.Info) > 0 {
		b = appendMapLen(b, 9)
	} else {
		b = appendMapLen(b, 8)
	}
	b = appendInt(appendStr(b, "id"), r.ID)
	b = appendBool(appendStr(b, "ok"), r.OK)
	b = appendStr(appendStr(b, "code"), r.Code)
	b = appendStr(appendStr(b, "error"), r.Error)
	b = appendStr(appendStr(b, "field"), r.Field)
	b = appendInt(appendStr(b, "rank"), r.Rank)
	b = appendInt(appendStr(b, "size"), r.Size)
	b = appendArrayLen(appendStr(b, "data"), len(r.Data))
	for _, d := range r.Data {
		b = appendBin(b, d)
	}
	if len(r.Info) > 0 {
		b = appendMapLen(appendStr(b, "info"), len(r.Info))
		for _, k := range slices.Sorted(maps.Keys(r.Info)) {
			b = appendInt(appendStr(b, k), r.Info[k])
		}
	}
	return b
}

// DecodeReply decodes a reply message (clients). Data are views of msg.
func DecodeReply(msg []byte) (*Reply, error) {
	c := &cur{b: msg}
	n, err := c.length("map")
	if err != nil {
		return nil, fmt.Errorf("reply: %w", err)
	}
	r := &Reply{}
	for range n {
		k, err := c.str(64)
		if err != nil {
			return nil, fmt.Errorf("reply: key: %w", err)
		}
		if err := r.field(c, k); err != nil {
			return nil, fmt.Errorf("reply: field %q: %w", k, err)
		}
	}
	return r, nil
}

func (r *Reply) field(c *cur, k string) error {
	var err error
	switch k {
	case "id":
		r.ID, err = c.int()
	case "ok":
		r.OK, err = c.bool()
	case "code":
		r.Code, err = c.str(64)
	case "error":
		r.Error, err = c.str(1 << 20)
	case "field":
		r.Field, err = c.str(1 << 12)
	case "rank":
		r.Rank, err = c.int()
	case "size":
		r.Size, err = c.int()
	case "data":
		var n int
		if n, err = c.length("array"); err != nil {
			return err
		}
		r.Data = make([][]byte, n)
		for i := range r.Data {
			if r.Data[i], err = c.bin(); err != nil {
				return err
			}
		}
	case "info":
		var n int
		if n, err = c.length("map"); err != nil {
			return err
		}
		r.Info = make(map[string]int64, n)
		for range n {
			k, err := c.str(64)
			if err != nil {
				return err
			}
			if r.Info[k], err = c.int(); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	default:
		err = c.skip(1)
	}
	return err
}

// Err is the reply's failure as an error (nil when OK).
func (r *Reply) Err() error {
	if r.OK {
		return nil
	}
	return &ReplyError{ID: r.ID, Code: r.Code, Msg: r.Error, Field: r.Field, Rank: r.Rank}
}

// ReplyError is a failed reply, as a client sees it.
type ReplyError struct {
	ID          int64
	Code, Field string
	Msg         string
	Rank        int64
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("serve: request %d: %s: %s", e.ID, e.Code, e.Msg)
}

// failure turns an error into a failed reply for request id.
func failure(id int64, code string, err error) *Reply {
	r := &Reply{ID: id, Code: code, Error: err.Error(), Rank: -1}
	var re *RequestError
	if errors.As(err, &re) {
		r.Field = re.Field
	}
	var rk interface{ FailedRank() int }
	var pe *mesh.PeerError
	switch {
	case errors.As(err, &pe):
		r.Rank = int64(pe.Rank)
	case errors.As(err, &rk):
		r.Rank = int64(rk.FailedRank())
	}
	return r
}
