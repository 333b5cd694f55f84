package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"

	"trainwire.dev/lib/wire"
)

var toWire = map[string]wire.DType{"F32": "f32", "F64": "f64", "F16": "f16", "BF16": "bf16", "I8": "i8", "U8": "u8",
	"I16": "i16", "I32": "i32", "I64": "i64", "U32": "u32", "U64": "u64", "BOOL": "bool"}

// Dense returns the tensors of a safetensors file b as dense frames
// (payloads alias b). Types trainwire has no dtype for are an error.
func Dense(b []byte) ([]*wire.Dense, error) {
	ts, err := Parse(b)
	if err != nil {
		return nil, err
	}
	data := b[8+binary.LittleEndian.Uint64(b):]
	out := make([]*wire.Dense, 0, len(ts))
	for _, t := range ts {
		dt, ok := toWire[t.DType]
		if !ok {
			return nil, fmt.Errorf("safetensors: tensor %q: dtype %s has no trainwire equivalent", t.Name, t.DType)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		out = append(out, &wire.Dense{Name: t.Name, Rank: -1, DType: dt, Shape: shape, Data: data[t.Begin:t.End]})
	}
	return out, nil
}

// Write writes dense frames as one safetensors file, in order.
func Write(w io.Writer, ds []*wire.Dense) error { return WriteMeta(w, ds, nil) }

// WriteMeta is Write with a __metadata__ entry (strings to strings), if
// meta is not empty.
func WriteMeta(w io.Writer, ds []*wire.Dense, meta map[string]string) error {
	from := map[wire.DType]string{}
	for k, v := range toWire {
		from[v] = k
	}
	hdr := map[string]entry{}
	var off int64
	for _, d := range ds {
		st, ok := from[d.DType]
		if !ok {
			return fmt.Errorf("safetensors: tensor %q: dtype %s has no safetensors equivalent", d.Name, d.DType)
		}
		if _, dup := hdr[d.Name]; dup {
			return fmt.Errorf("safetensors: tensor name %q appears twice", d.Name)
		}
		shape := d.Shape
		if shape == nil {
			shape = []int64{}
		}
		hdr[d.Name] = entry{DType: st, Shape: shape, DataOffsets: []int64{off, off + int64(len(d.Data))}}
		off += int64(len(d.Data))
	}
	var full any = hdr
	if len(meta) > 0 {
		m := map[string]any{"__metadata__": meta}
		for k, v := range hdr {
			m[k] = v
		}
		full = m
	}
	h, err := json.Marshal(full)
	if err != nil {
		return err
	}
	// Pad the header with spaces to a multiple of 8 (the data stays aligned).
	for (len(h))%8 != 0 {
		h = append(h, ' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(h)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(h); err != nil {
		return err
	}
	for _, d := range ds {
		if _, err := w.Write(d.Data); err != nil {
			return err
		}
	}
	return nil
}
