package serve

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"trainwire.dev/lib/wire"
)

// Ops a request may name.
const (
	OpPing   = "ping"   // answered at once, by the sidecar alone
	OpAttach = "attach" // map the segment whose descriptor comes with the message
	OpDetach = "detach" // unmap a segment
	OpSync   = "sync"   // a collective over every rank's tensors
	// OpAllToAll is an alltoall of rows: its tensors come in pairs, an i64
	// "<name>.splits" of world split sizes then the rows "<name>"; the
	// reply carries the split sizes and the rows received, inline.
	OpAllToAll = "alltoall"
)

// Limits bound what one request may make the sidecar read or allocate.
type Limits struct {
	// MaxMessage is the largest message (request or reply), in bytes:
	// inline tensors count against it.
	MaxMessage int
	// MaxTensors is the most tensors one request may name.
	MaxTensors int
	// MaxName is the longest tensor name, in bytes.
	MaxName int
	// MaxSegments is the most segments a client may attach at once.
	MaxSegments int
	// Options are the bool options of a sync's opts that a tool accepts
	// besides average (straggle: contribute); they land in Request.Opts.
	// Any other option is an error naming it.
	Options []string
}

// DefaultLimits: 64 MiB messages, 65,536 tensors, 4 KiB names, 64 segments.
var DefaultLimits = Limits{MaxMessage: 64 << 20, MaxTensors: 1 << 16, MaxName: 4096, MaxSegments: 64}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.MaxMessage <= 0 {
		l.MaxMessage = d.MaxMessage
	}
	if l.MaxTensors <= 0 {
		l.MaxTensors = d.MaxTensors
	}
	if l.MaxName <= 0 {
		l.MaxName = d.MaxName
	}
	if l.MaxSegments <= 0 {
		l.MaxSegments = d.MaxSegments
	}
	return l
}

// maxDims bounds a shape, as in lib/wire.
const maxDims = 16

// Request is one decoded request (docs/serve.md, "Requests").
type Request struct {
	// ID is the client's id, echoed in the reply; -1 when unreadable.
	ID int64
	// Op is ping, attach, detach or sync.
	Op string
	// Seg is the segment an attach or detach names.
	Seg int64
	// Step is the training step a sync is for (≥ 0).
	Step int64
	// Tensors are a sync's tensors, in the order the results come back.
	Tensors []Tensor
	// Average divides the sums by the world size (option "average").
	Average bool
	// Opts holds the tool's own bool options (Limits.Options) the request
	// gave; absent ones are not in it.
	Opts map[string]bool
}

// Tensor is one tensor of a sync request: in a segment (Seg, Off, Len) or
// inline (Data, a view of the request's message).
type Tensor struct {
	Name  string
	DType wire.DType
	Shape []int64
	// Inline: the bytes are Data; otherwise Len bytes at Off in segment Seg.
	Inline        bool
	Data          []byte
	Seg, Off, Len int64
}

// Bytes is the tensor's size: prod(shape)·sizeof(dtype) (checked against
// Len or len(Data) by the decoder).
func (t *Tensor) Bytes() int64 {
	if t.Inline {
		return int64(len(t.Data))
	}
	return t.Len
}

// RequestError is a request the sidecar refuses: it names the request (ID,
// -1 when the id itself is unreadable) and the field.
type RequestError struct {
	ID    int64
	Field string
	Err   error
}

func (e *RequestError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("request %d: %v", e.ID, e.Err)
	}
	return fmt.Sprintf("request %d: field %q: %v", e.ID, e.Field, e.Err)
}

func (e *RequestError) Unwrap() error { return e.Err }

// DecodeRequest decodes one request message (the bytes after the length
// prefix). Tensor data of inline tensors are views of msg. On error the
// returned Request still carries what could be read of ID and Op, and the
// error is a *RequestError naming the field.
func DecodeRequest(msg []byte, lim Limits) (*Request, error) {
	lim = lim.withDefaults()
	r := &Request{ID: -1}
	d := &decoder{c: cur{b: msg}, lim: lim, r: r}
	d.head()
	c := cur{b: msg}
	if err := d.body(&c); err != nil {
		var re *RequestError
		if !errors.As(err, &re) {
			re = &RequestError{Err: err}
		}
		re.ID = r.ID
		return r, re
	}
	if c.off != len(msg) {
		return r, &RequestError{ID: r.ID, Err: fmt.Errorf("at byte %d: %d bytes after the request map", c.off, len(msg)-c.off)}
	}
	return r, nil
}

type decoder struct {
	c   cur
	lim Limits
	r   *Request
}

// head reads id and op alone, wherever they are in the map, so that an
// error later in the request still names them.
func (d *decoder) head() {
	c := &d.c
	n, err := c.length("map")
	if err != nil {
		return
	}
	for range n {
		k, err := c.str(64)
		if err != nil {
			return
		}
		at := c.off
		switch k {
		case "id":
			if v, err := c.int(); err == nil && v >= 0 {
				d.r.ID = v
				continue
			}
		case "op":
			if v, err := c.str(64); err == nil {
				d.r.Op = v
				continue
			}
		}
		c.off = at
		if c.skip(1) != nil {
			return
		}
	}
}

func fieldErr(field string, err error) error { return &RequestError{Field: field, Err: err} }

// body decodes the whole request map.
func (d *decoder) body(c *cur) error {
	n, err := c.length("map")
	if err != nil {
		return fmt.Errorf("request: %w", err)
	}
	seen := map[string]bool{}
	for range n {
		k, err := c.str(64)
		if err != nil {
			return fmt.Errorf("key: %w", err)
		}
		if seen[k] {
			return fieldErr(k, fmt.Errorf("at byte %d: key given twice", c.off))
		}
		seen[k] = true
		if err := d.field(c, k); err != nil {
			return err
		}
	}
	return d.check(seen)
}

func (d *decoder) field(c *cur, k string) error {
	r := d.r
	var err error
	switch k {
	case "id":
		r.ID, err = nonNeg(c)
	case "op":
		r.Op, err = c.str(64)
	case "seg":
		r.Seg, err = nonNeg(c)
	case "step":
		r.Step, err = nonNeg(c)
	case "tensors":
		r.Tensors, err = d.tensors(c)
	case "opts":
		err = d.opts(c)
	default:
		err = c.skip(1) // unknown keys are ignored, so requests can grow
	}
	var re *RequestError
	if err == nil || errors.As(err, &re) {
		return err // nil, or already names its field
	}
	return fieldErr(k, err)
}

func nonNeg(c *cur) (int64, error) {
	at := c.off
	v, err := c.int()
	if err == nil && v < 0 {
		return 0, fmt.Errorf("at byte %d: %d is negative", at, v)
	}
	return v, err
}

// check enforces what each op requires once every key is read.
func (d *decoder) check(seen map[string]bool) error {
	r := d.r
	if !seen["id"] {
		return fieldErr("id", errors.New("missing"))
	}
	if !seen["op"] {
		return fieldErr("op", errors.New("missing"))
	}
	switch r.Op {
	case OpPing:
	case OpAttach, OpDetach:
		if !seen["seg"] {
			return fieldErr("seg", fmt.Errorf("missing (%s names a segment)", r.Op))
		}
	case OpSync, OpAllToAll:
	default:
		return fieldErr("op", fmt.Errorf("%q: want ping, attach, detach, sync or alltoall", r.Op))
	}
	return nil
}

// opts reads the options map: every key must be known.
func (d *decoder) opts(c *cur) error {
	n, err := c.length("map")
	if err != nil {
		return err
	}
	for range n {
		k, err := c.str(64)
		if err != nil {
			return err
		}
		switch k {
		case "average":
			if d.r.Average, err = c.bool(); err != nil {
				return fieldErr("opts.average", err)
			}
		default:
			if !slices.Contains(d.lim.Options, k) {
				return fieldErr("opts."+k, fmt.Errorf("unknown option (known: %s)", strings.Join(append([]string{"average"}, d.lim.Options...), ", ")))
			}
			v, err := c.bool()
			if err != nil {
				return fieldErr("opts."+k, err)
			}
			if d.r.Opts == nil {
				d.r.Opts = map[string]bool{}
			}
			d.r.Opts[k] = v
		}
	}
	return nil
}

// tensors reads the tensor list, bounded by MaxTensors before allocating.
func (d *decoder) tensors(c *cur) ([]Tensor, error) {
	n, err := c.length("array")
	if err != nil {
		return nil, err
	}
	if n > d.lim.MaxTensors {
		return nil, fmt.Errorf("at byte %d: %d tensors, at most %d", c.off, n, d.lim.MaxTensors)
	}
	ts := make([]Tensor, n)
	for i := range ts {
		if err := d.tensor(c, i, &ts[i]); err != nil {
			return nil, err
		}
	}
	return ts, nil
}

func (d *decoder) tensor(c *cur, i int, t *Tensor) error {
	name := func(k string) string { return fmt.Sprintf("tensors[%d].%s", i, k) }
	n, err := c.length("map")
	if err != nil {
		return fieldErr(fmt.Sprintf("tensors[%d]", i), err)
	}
	seen := map[string]bool{}
	for range n {
		k, err := c.str(64)
		if err != nil {
			return fieldErr(fmt.Sprintf("tensors[%d]", i), err)
		}
		if seen[k] {
			return fieldErr(name(k), fmt.Errorf("at byte %d: key given twice", c.off))
		}
		seen[k] = true
		if err := d.tensorField(c, k, t); err != nil {
			return fieldErr(name(k), err)
		}
	}
	for _, k := range []string{"name", "dtype", "shape"} {
		if !seen[k] {
			return fieldErr(name(k), errors.New("missing"))
		}
	}
	shm := seen["seg"] || seen["off"] || seen["len"]
	switch {
	case seen["data"] && shm:
		return fieldErr(name("data"), errors.New("a tensor is inline (data) or in a segment (seg, off, len), not both"))
	case shm:
		for _, k := range []string{"seg", "off", "len"} {
			if !seen[k] {
				return fieldErr(name(k), errors.New("missing (a tensor in a segment needs seg, off and len)"))
			}
		}
	case !seen["data"]:
		return fieldErr(name("data"), errors.New("missing: give data (inline) or seg, off and len"))
	}
	t.Inline = seen["data"]
	return sizeCheck(t, name)
}

// sizeCheck checks that the bytes given are prod(shape)·sizeof(dtype).
func sizeCheck(t *Tensor, name func(string) string) error {
	size := int64(t.DType.Size())
	numel := int64(1)
	for _, s := range t.Shape {
		if s != 0 && numel > math.MaxInt64/s {
			return fieldErr(name("shape"), fmt.Errorf("%v: too many elements", t.Shape))
		}
		numel *= s
	}
	if numel > math.MaxInt64/size {
		return fieldErr(name("shape"), fmt.Errorf("%v: too many bytes", t.Shape))
	}
	field := "len"
	if t.Inline {
		field = "data"
	}
	if want := numel * size; t.Bytes() != want {
		return fieldErr(name(field), fmt.Errorf("%d bytes, want %d (shape %v of %s)", t.Bytes(), want, t.Shape, t.DType))
	}
	return nil
}

func (d *decoder) tensorField(c *cur, k string, t *Tensor) error {
	var err error
	switch k {
	case "name":
		t.Name, err = c.str(d.lim.MaxName)
	case "dtype":
		var s string
		if s, err = c.str(16); err == nil {
			t.DType = wire.DType(s)
			if !t.DType.Valid() {
				err = fmt.Errorf("%q: not a trainwire dtype (docs/wire.md)", s)
			}
		}
	case "shape":
		t.Shape, err = shape(c)
	case "seg":
		t.Seg, err = nonNeg(c)
	case "off":
		t.Off, err = nonNeg(c)
	case "len":
		t.Len, err = nonNeg(c)
	case "data":
		t.Data, err = c.bin()
	default:
		err = c.skip(1)
	}
	return err
}

func shape(c *cur) ([]int64, error) {
	n, err := c.length("array")
	if err != nil {
		return nil, err
	}
	if n > maxDims {
		return nil, fmt.Errorf("at byte %d: %d dimensions, at most %d", c.off, n, maxDims)
	}
	s := make([]int64, n)
	for i := range s {
		if s[i], err = nonNeg(c); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// AppendRequest appends r's message body in the canonical key order: id,
// op, then seg (attach, detach) or step, tensors and opts (sync: average,
// then the tool's options in key order).
func AppendRequest(b []byte, r *Request) []byte {
	switch r.Op {
	case OpAttach, OpDetach:
		b = appendMapLen(b, 3)
	case OpSync, OpAllToAll:
		b = appendMapLen(b, 5)
	default:
		b = appendMapLen(b, 2)
	}
	b = appendInt(appendStr(b, "id"), r.ID)
	b = appendStr(appendStr(b, "op"), r.Op)
	switch r.Op {
	case OpAttach, OpDetach:
		return appendInt(appendStr(b, "seg"), r.Seg)
	case OpSync, OpAllToAll:
	default:
		return b
	}
	b = appendInt(appendStr(b, "step"), r.Step)
	b = appendArrayLen(appendStr(b, "tensors"), len(r.Tensors))
	for i := range r.Tensors {
		b = appendTensor(b, &r.Tensors[i])
	}
	b = appendMapLen(appendStr(b, "opts"), 1+len(r.Opts))
	b = appendBool(appendStr(b, "average"), r.Average)
	for _, k := range slices.Sorted(maps.Keys(r.Opts)) {
		b = appendBool(appendStr(b, k), r.Opts[k])
	}
	return b
}

func appendTensor(b []byte, t *Tensor) []byte {
	if t.Inline {
		b = appendMapLen(b, 4)
	} else {
		b = appendMapLen(b, 6)
	}
	b = appendStr(appendStr(b, "name"), t.Name)
	b = appendStr(appendStr(b, "dtype"), string(t.DType))
	b = appendArrayLen(appendStr(b, "shape"), len(t.Shape))
	for _, s := range t.Shape {
		b = appendInt(b, s)
	}
	if t.Inline {
		return appendBin(appendStr(b, "data"), t.Data)
	}
	b = appendInt(appendStr(b, "seg"), t.Seg)
	b = appendInt(appendStr(b, "off"), t.Off)
	return appendInt(appendStr(b, "len"), t.Len)
}
