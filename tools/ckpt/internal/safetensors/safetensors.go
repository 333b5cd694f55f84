// Package safetensors checks the safetensors format (8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the data) so that ckpt refuses a malformed file before it
// is replicated as a checkpoint.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"sort"
)

// MaxHeader bounds the JSON header (the reference implementation uses
// 100 MB).
const MaxHeader = 100 << 20

// Tensor is one entry of the header.
type Tensor struct {
	Name  string
	DType string
	Shape []int64
	// Begin and End are byte offsets into the data section.
	Begin, End int64
}

var dtypeSize = map[string]int64{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4,
	"I64": 8, "U64": 8, "F64": 8,
}

type entry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Parse checks b as a whole safetensors file and returns its tensors in
// data order. Every length is bounded by len(b) before use.
func Parse(b []byte) ([]Tensor, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("safetensors: %d bytes, shorter than the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > MaxHeader || n > uint64(len(b)-8) {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the file (%d bytes) or %d", n, len(b), MaxHeader)
	}
	hdr := b[8 : 8+n]
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return nil, fmt.Errorf("safetensors: header is not a JSON object: %w", err)
	}
	dataLen := int64(len(b)) - 8 - int64(n)
	var out []Tensor
	for name, r := range raw {
		if name == "__metadata__" {
			var m map[string]string
			if err := json.Unmarshal(r, &m); err != nil {
				return nil, fmt.Errorf("safetensors: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		var e entry
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		size, ok := dtypeSize[e.DType]
		if !ok {
			return nil, fmt.Errorf("safetensors: tensor %q: unknown dtype %q", name, e.DType)
		}
		if len(e.DataOffsets) != 2 {
			return nil, fmt.Errorf("safetensors: tensor %q: data_offsets must be [begin, end]", name)
		}
		begin, end := e.DataOffsets[0], e.DataOffsets[1]
		if begin < 0 || end < begin || end > dataLen {
			return nil, fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] outside the %d data bytes", name, begin, end, dataLen)
		}
		numel := int64(1)
		for _, d := range e.Shape {
			if d < 0 || (d > 0 && numel > (1<<62)/d) {
				return nil, fmt.Errorf("safetensors: tensor %q: bad shape %v", name, e.Shape)
			}
			numel *= d
		}
		if numel > (1<<62)/size || numel*size != end-begin {
			return nil, fmt.Errorf("safetensors: tensor %q: shape %v of %s is %d bytes, data_offsets give %d", name, e.Shape, e.DType, numel*size, end-begin)
		}
		out = append(out, Tensor{Name: name, DType: e.DType, Shape: e.Shape, Begin: begin, End: end})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Begin < out[j].Begin })
	var at int64
	for _, t := range out {
		if t.Begin != at {
			return nil, fmt.Errorf("safetensors: tensor %q starts at %d, expected %d (holes or overlaps)", t.Name, t.Begin, at)
		}
		at = t.End
	}
	if at != dataLen {
		return nil, fmt.Errorf("safetensors: tensors cover %d of %d data bytes", at, dataLen)
	}
	return out, nil
}
