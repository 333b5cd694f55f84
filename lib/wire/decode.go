package wire

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
	"github.com/zeebo/xxh3"

	"trainwire.dev/lib/tensor"
)

// eagerAlloc is the most a payload buffer is allocated up front; larger
// payloads grow as their bytes actually arrive, so a forged length costs
// at most this much memory before the input runs out.
const eagerAlloc = 64 << 20

// dec decodes one frame with bounded allocation.
type dec struct {
	d    *msgpack.Decoder
	cr   *countReader
	lim  *Limits
	hash *xxh3.Hasher // non-nil inside data frames: every bin goes through it
	pool *tensor.Pool // when set, where payloads come from (Reader.SetPool)
}

func codeName(c byte) string {
	switch {
	case msgpcode.IsFixedNum(c):
		return "int"
	case msgpcode.IsFixedMap(c):
		return "map"
	case msgpcode.IsFixedArray(c):
		return "array"
	case msgpcode.IsFixedString(c):
		return "str"
	}
	switch c {
	case msgpcode.Nil:
		return "nil"
	case msgpcode.False, msgpcode.True:
		return "bool"
	case msgpcode.Bin8:
		return "bin8"
	case msgpcode.Bin16:
		return "bin16"
	case msgpcode.Bin32:
		return "bin32"
	case msgpcode.Str8:
		return "str8"
	case msgpcode.Str16:
		return "str16"
	case msgpcode.Str32:
		return "str32"
	case msgpcode.Float:
		return "float32"
	case msgpcode.Double:
		return "float64"
	case msgpcode.Uint8, msgpcode.Uint16, msgpcode.Uint32, msgpcode.Uint64,
		msgpcode.Int8, msgpcode.Int16, msgpcode.Int32, msgpcode.Int64:
		return "int"
	case msgpcode.Array16, msgpcode.Array32:
		return "array"
	case msgpcode.Map16, msgpcode.Map32:
		return "map"
	case msgpcode.FixExt1, msgpcode.FixExt2, msgpcode.FixExt4, msgpcode.FixExt8, msgpcode.FixExt16,
		msgpcode.Ext8, msgpcode.Ext16, msgpcode.Ext32:
		return "ext"
	}
	return fmt.Sprintf("reserved code 0x%02x", c)
}

func isStr(c byte) bool {
	return msgpcode.IsFixedString(c) || c == msgpcode.Str8 || c == msgpcode.Str16 || c == msgpcode.Str32
}

func isBin(c byte) bool { return c == msgpcode.Bin8 || c == msgpcode.Bin16 || c == msgpcode.Bin32 }

func isInt(c byte) bool { return codeName(c) == "int" }

func isArray(c byte) bool {
	return msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32
}

func isMap(c byte) bool { return msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32 }

func (d *dec) want(what string, ok func(byte) bool) (byte, error) {
	c, err := d.d.PeekCode()
	if err != nil {
		return 0, err
	}
	if !ok(c) {
		return c, fmt.Errorf("is %s, want %s", codeName(c), what)
	}
	return c, nil
}

func (d *dec) str() (string, error) {
	if _, err := d.want("str", isStr); err != nil {
		return "", err
	}
	n, err := d.d.DecodeBytesLen()
	if err != nil {
		return "", err
	}
	if n > d.lim.MaxString {
		return "", fmt.Errorf("string of %d bytes exceeds the limit %d", n, d.lim.MaxString)
	}
	b := make([]byte, n)
	if err := d.d.ReadFull(b); err != nil {
		return "", err
	}
	return string(b), nil
}

func (d *dec) int() (int64, error) {
	c, err := d.want("int", isInt)
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Uint64 {
		u, err := d.d.DecodeUint64()
		if err != nil {
			return 0, err
		}
		if u > math.MaxInt64 {
			return 0, fmt.Errorf("integer %d overflows int64", u)
		}
		return int64(u), nil
	}
	return d.d.DecodeInt64()
}

func (d *dec) uint() (uint64, error) {
	c, err := d.want("int", isInt)
	if err != nil {
		return 0, err
	}
	if c == msgpcode.Uint64 {
		return d.d.DecodeUint64()
	}
	v, err := d.d.DecodeInt64()
	if err != nil {
		return 0, err
	}
	if v < 0 {
		return 0, fmt.Errorf("negative integer %d, want unsigned", v)
	}
	return uint64(v), nil
}

func (d *dec) float() (float64, error) {
	c, err := d.d.PeekCode()
	if err != nil {
		return 0, err
	}
	switch {
	case c == msgpcode.Double || c == msgpcode.Float:
		return d.d.DecodeFloat64()
	case isInt(c):
		v, err := d.int()
		return float64(v), err
	}
	return 0, fmt.Errorf("is %s, want float", codeName(c))
}

func (d *dec) bool() (bool, error) {
	if _, err := d.want("bool", func(c byte) bool { return c == msgpcode.True || c == msgpcode.False }); err != nil {
		return false, err
	}
	return d.d.DecodeBool()
}

func (d *dec) arrayLen() (int, error) {
	if _, err := d.want("array", isArray); err != nil {
		return 0, err
	}
	n, err := d.d.DecodeArrayLen()
	if err != nil {
		return 0, err
	}
	if n > d.lim.MaxElems {
		return 0, fmt.Errorf("array of %d elements exceeds the limit %d", n, d.lim.MaxElems)
	}
	return n, nil
}

func (d *dec) mapLen() (int, error) {
	if _, err := d.want("map", isMap); err != nil {
		return 0, err
	}
	n, err := d.d.DecodeMapLen()
	if err != nil {
		return 0, err
	}
	if n > d.lim.MaxElems {
		return 0, fmt.Errorf("map of %d entries exceeds the limit %d", n, d.lim.MaxElems)
	}
	return n, nil
}

// bin reads a bin value. The declared length is checked against the limit;
// memory grows with the bytes that actually arrive beyond eagerAlloc.
func (d *dec) bin() ([]byte, error) {
	if _, err := d.want("bin", isBin); err != nil {
		return nil, err
	}
	n, err := d.d.DecodeBytesLen()
	if err != nil {
		return nil, err
	}
	if int64(n) > d.lim.MaxPayload {
		return nil, fmt.Errorf("payload of %d bytes exceeds the limit %d (--max-payload)", n, d.lim.MaxPayload)
	}
	var b []byte
	if n <= eagerAlloc {
		b = d.alloc(n)
		if err := d.d.ReadFull(b); err != nil {
			return nil, err
		}
	} else {
		b = make([]byte, 0, eagerAlloc)
		for len(b) < n {
			step := min(n-len(b), max(len(b), eagerAlloc))
			b = slices.Grow(b, step)[:len(b)+step]
			if err := d.d.ReadFull(b[len(b)-step:]); err != nil {
				return nil, err
			}
		}
	}
	if d.hash != nil {
		_, _ = d.hash.Write(b)
	}
	return b, nil
}

// alloc returns n bytes for a payload that the read fills: from the pool
// when there is one and the payload is a large whole number of float32.
func (d *dec) alloc(n int) []byte {
	if d.pool != nil && n >= 4096 && n%4 == 0 {
		return tensor.Bytes(d.pool.Get(n / 4))
	}
	return make([]byte, n)
}

func (d *dec) shape() ([]int64, error) {
	n, err := d.arrayLen()
	if err != nil {
		return nil, err
	}
	if n > d.lim.MaxDims {
		return nil, fmt.Errorf("%d dimensions exceed the limit %d", n, d.lim.MaxDims)
	}
	s := make([]int64, n)
	for i := range s {
		if s[i], err = d.int(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (d *dec) dtype() (DType, error) {
	s, err := d.str()
	return DType(s), err
}

func (d *dec) strMap() (map[string]string, error) {
	n, err := d.mapLen()
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, n)
	for range n {
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if m[k], err = d.str(); err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
	}
	return m, nil
}

func (d *dec) floatMap() (map[string]float64, error) {
	n, err := d.mapLen()
	if err != nil {
		return nil, err
	}
	m := make(map[string]float64, n)
	for range n {
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		if m[k], err = d.float(); err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
	}
	return m, nil
}

func (d *dec) anyMap(depth int) (map[string]any, error) {
	n, err := d.mapLen()
	if err != nil {
		return nil, err
	}
	m := make(map[string]any, n)
	for range n {
		k, err := d.str()
		if err != nil {
			return nil, fmt.Errorf("map key: %w", err)
		}
		if m[k], err = d.any(depth + 1); err != nil {
			return nil, fmt.Errorf("key %q: %w", k, err)
		}
	}
	return m, nil
}

// any decodes a free-form value: nil, bool, int64 (uint64 above MaxInt64),
// float64, string, []byte, []any or map[string]any.
func (d *dec) any(depth int) (any, error) {
	if depth > d.lim.MaxDepth {
		return nil, fmt.Errorf("values nested deeper than %d", d.lim.MaxDepth)
	}
	c, err := d.d.PeekCode()
	if err != nil {
		return nil, err
	}
	switch {
	case c == msgpcode.Nil:
		return nil, d.d.DecodeNil()
	case c == msgpcode.True || c == msgpcode.False:
		return d.bool()
	case c == msgpcode.Uint64:
		u, err := d.d.DecodeUint64()
		if err == nil && u <= math.MaxInt64 {
			return int64(u), nil
		}
		return u, err
	case isInt(c):
		return d.int()
	case c == msgpcode.Double || c == msgpcode.Float:
		return d.d.DecodeFloat64()
	case isStr(c):
		return d.str()
	case isBin(c):
		return d.bin()
	case isArray(c):
		n, err := d.arrayLen()
		if err != nil {
			return nil, err
		}
		a := make([]any, n)
		for i := range a {
			if a[i], err = d.any(depth + 1); err != nil {
				return nil, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return a, nil
	case isMap(c):
		return d.anyMap(depth)
	}
	return nil, fmt.Errorf("value is %s, not allowed in a stream", codeName(c))
}

// skip discards a value of an unknown key, bounded like any; strings and
// bins are streamed past without being allocated (bins of data frames
// through the digest).
func (d *dec) skip() error {
	c, err := d.d.PeekCode()
	if err != nil {
		return err
	}
	if isStr(c) {
		n, err := d.d.DecodeBytesLen()
		if err != nil {
			return err
		}
		if n > d.lim.MaxString {
			return fmt.Errorf("string of %d bytes exceeds the limit %d", n, d.lim.MaxString)
		}
		_, err = io.CopyN(io.Discard, d.cr, int64(n))
		return err
	}
	if isBin(c) {
		n, err := d.d.DecodeBytesLen()
		if err != nil {
			return err
		}
		if int64(n) > d.lim.MaxPayload {
			return fmt.Errorf("payload of %d bytes exceeds the limit %d", n, d.lim.MaxPayload)
		}
		var sink io.Writer = io.Discard
		if d.hash != nil {
			sink = d.hash // the digest covers every bin of a data frame
		}
		_, err = io.CopyN(sink, d.cr, int64(n))
		return err
	}
	_, err = d.any(0)
	return err
}

// frame decodes one frame: the map, "t" first, "v" second, then the
// type's keys in any order (unknown keys skipped). It returns the type name
// for error messages even when decoding fails.
func (d *dec) frame(inStream bool, hash *xxh3.Hasher) (string, Frame, error) {
	n, err := d.mapLen()
	if err != nil {
		return "", nil, fmt.Errorf("frame %w", err)
	}
	if n < 2 {
		return "", nil, fmt.Errorf("frame map has %d keys, want at least t and v", n)
	}
	if k, err := d.str(); err != nil {
		return "", nil, fmt.Errorf("first key: %w", err)
	} else if k != "t" {
		return "", nil, fmt.Errorf("first key must be \"t\", got %q", k)
	}
	typ, err := d.str()
	if err != nil {
		return "", nil, fieldErr("t", err)
	}
	if k, err := d.str(); err != nil {
		return typ, nil, fmt.Errorf("second key: %w", err)
	} else if k != "v" {
		return typ, nil, fmt.Errorf("second key must be \"v\", got %q", k)
	}
	v, err := d.int()
	if err != nil {
		return typ, nil, fieldErr("v", err)
	}
	if v < 1 || v > 1 {
		return typ, nil, fieldErr("v", fmt.Errorf("version %d, this reader knows 1", v))
	}
	f, set := newFrame(typ)
	if f == nil {
		return typ, nil, fieldErr("t", fmt.Errorf("unknown frame type %q", typ))
	}
	if !structural(typ) {
		d.hash = hash
	}
	var seen keySet
	for range n - 2 {
		k, err := d.str()
		if err != nil {
			return typ, nil, fmt.Errorf("key: %w", err)
		}
		if !seen.add(k) {
			return typ, nil, fieldErr(k, errors.New("key appears twice"))
		}
		known, err := set(d, k)
		if err != nil {
			return typ, nil, fieldErr(k, err)
		}
		if !known {
			if err := d.skip(); err != nil {
				return typ, nil, fieldErr(k, err)
			}
		}
	}
	for _, k := range required[typ] {
		if !seen.has(k) {
			return typ, nil, fieldErr(k, errors.New("missing"))
		}
	}
	return typ, f, nil
}

// structural reports whether frames of type typ are stream structure
// (header, end, step_end) rather than data: not counted, not hashed.
func structural(typ string) bool {
	return typ == TypeHeader || typ == TypeEnd || typ == TypeStepEnd
}

// required lists the keys without which a frame means nothing; others
// default to zero (and -1 for rank, frame, corr and stream).
var required = map[string][]string{
	TypeHeader:     {"schema"},
	TypeEnd:        {"count", "xxh3"},
	TypeStepEnd:    {"step"},
	TypeDense:      {"dtype", "shape", "data"},
	TypeSparse:     {"dtype", "shape", "width", "format", "nnz", "indices", "values"},
	TypeCompressed: {"algo", "dtype", "shape", "parts"},
	TypeChunk:      {"offset", "len", "total_len", "crc32c", "data"},
}

// setter decodes the value of key k into the frame; known is false for
// keys the frame type does not have.
type setter func(d *dec, k string) (known bool, err error)

func newFrame(typ string) (Frame, setter) {
	switch typ {
	case TypeHeader:
		f := &Header{}
		return f, f.set
	case TypeEnd:
		f := &End{}
		return f, f.set
	case TypeStepEnd:
		f := &StepEnd{}
		return f, f.set
	case TypeDense:
		f := &Dense{Rank: -1}
		return f, f.set
	case TypeSparse:
		f := &Sparse{Rank: -1}
		return f, f.set
	case TypeCompressed:
		f := &Compressed{Rank: -1}
		return f, f.set
	case TypeEvent:
		f := &Event{Rank: -1, Stream: -1, Corr: -1}
		return f, f.set
	case TypeModel:
		f := &Model{}
		return f, f.set
	case TypePlan:
		f := &Plan{}
		return f, f.set
	case TypeChunk:
		f := &Chunk{SrcRank: -1, ReplicaOf: -1}
		return f, f.set
	case TypeStats:
		f := &Stats{Rank: -1}
		return f, f.set
	case TypeError:
		f := &Error{Rank: -1, Frame: -1}
		return f, f.set
	}
	return nil, nil
}

// keySet remembers a frame's keys without allocating for the dozen a
// frame normally has, and without going quadratic on a hostile frame with
// a million unknown keys.
type keySet struct {
	small [16]string
	n     int
	big   map[string]struct{}
}

// add records k and reports whether it was new.
func (s *keySet) add(k string) bool {
	if s.has(k) {
		return false
	}
	if s.n < len(s.small) {
		s.small[s.n] = k
		s.n++
		return true
	}
	if s.big == nil {
		s.big = make(map[string]struct{})
	}
	s.big[k] = struct{}{}
	return true
}

func (s *keySet) has(k string) bool {
	if slices.Contains(s.small[:s.n], k) {
		return true
	}
	_, ok := s.big[k]
	return ok
}
