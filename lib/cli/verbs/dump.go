package verbs

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"

	"github.com/zeebo/xxh3"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/wire"
)

// DumpCmd prints any trainwire stream as JSON lines.
type DumpCmd struct {
	cli.WireFlags
	Files  []string `arg:"" optional:"" help:"Stream files to read; - or none for stdin." type:"path"`
	Values int      `help:"Show the first N elements of each payload (decoded by dtype)." default:"0"`
	Bytes  bool     `help:"Include whole payloads, base64-encoded."`
}

// Run prints one JSON object per frame, headers and ends included.
func (c *DumpCmd) Run(rio *cli.IO) error {
	enc := json.NewEncoder(rio.Stdout)
	enc.SetEscapeHTML(false)
	return cli.EachFrame(c.Files, rio.Stdin, c.Limits(), true, func(f wire.Frame) error {
		return enc.Encode(c.view(f))
	})
}

// view turns a frame into a JSON-friendly map: payloads become
// {"bytes", "xxh3"} (plus values or base64 on request).
func (c *DumpCmd) view(f wire.Frame) map[string]any {
	m := map[string]any{"t": f.Type()}
	switch f := f.(type) {
	case *wire.Header:
		m["producer"], m["schema"], m["meta"] = f.Producer, f.Schema, f.Meta
	case *wire.End:
		m["count"], m["xxh3"] = f.Count, fmt.Sprintf("%016x", f.XXH3)
	case *wire.StepEnd:
		m["step"] = f.Step
	case *wire.Dense:
		m["name"], m["step"], m["rank"], m["dtype"], m["shape"] = f.Name, f.Step, f.Rank, f.DType, f.Shape
		m["data"] = c.payload(f.Data, f.DType)
	case *wire.Sparse:
		m["name"], m["step"], m["rank"], m["dtype"], m["shape"] = f.Name, f.Step, f.Rank, f.DType, f.Shape
		m["width"], m["format"], m["itype"], m["nnz"] = f.Width, f.Format, f.IType, f.Nnz
		it := f.IType
		if f.Format == wire.Bitmap {
			it = wire.U8
		}
		m["indices"], m["values"] = c.payload(f.Indices, it), c.payload(f.Values, f.DType)
	case *wire.Compressed:
		m["name"], m["step"], m["rank"], m["algo"], m["params"] = f.Name, f.Step, f.Rank, f.Algo, jsonable(f.Params)
		m["dtype"], m["shape"] = f.DType, f.Shape
		parts := make([]any, len(f.Parts))
		for i, p := range f.Parts {
			parts[i] = map[string]any{"name": p.Name, "dtype": p.DType, "shape": p.Shape, "data": c.payload(p.Data, p.DType)}
		}
		m["parts"] = parts
	case *wire.Event:
		m["name"], m["cat"], m["ph"], m["rank"], m["pid"], m["tid"] = f.Name, f.Cat, f.Ph, f.Rank, f.PID, f.TID
		m["stream"], m["ts"], m["dur"], m["corr"], m["args"] = f.Stream, f.TS, f.Dur, f.Corr, jsonable(f.Args)
	case *wire.Model:
		m["name"], m["world"], m["iters"], m["iter_ns"] = f.Name, f.World, f.Iters, f.IterNS
		m["forward_ns"], m["backward_ns"], m["meta"] = f.ForwardNS, f.BackwardNS, jsonable(f.Meta)
		m["grads"], m["comm"] = f.Grads, f.Comm
	case *wire.Plan:
		items := make([]any, len(f.Items))
		for i, it := range f.Items {
			items[i] = jsonable(it)
		}
		m["kind"], m["algo"], m["groups"], m["items"] = f.Kind, f.Algo, f.Groups, items
		m["predicted_ns"], m["proven_optimal"], m["meta"] = f.PredictedNS, f.ProvenOptimal, jsonable(f.Meta)
	case *wire.Chunk:
		m["job"], m["iter"], m["src_rank"], m["replica_of"] = f.Job, f.Iter, f.SrcRank, f.ReplicaOf
		m["offset"], m["len"], m["total_len"], m["crc32c"] = f.Offset, f.Len, f.TotalLen, fmt.Sprintf("%08x", f.CRC32C)
		m["data"] = c.payload(f.Data, wire.U8)
	case *wire.Stats:
		m["tool"], m["name"], m["step"], m["rank"], m["labels"] = f.Tool, f.Name, f.Step, f.Rank, f.Labels
		m["values"] = jsonable(f.Values)
	case *wire.Error:
		m["code"], m["msg"], m["rank"], m["frame"] = f.Code, f.Msg, f.Rank, f.Frame
	}
	return m
}

func (c *DumpCmd) payload(b []byte, dt wire.DType) map[string]any {
	p := map[string]any{"bytes": len(b), "xxh3": fmt.Sprintf("%016x", xxh3.Hash(b))}
	if c.Values > 0 {
		p["values"] = decodeValues(b, dt, c.Values)
	}
	if c.Bytes {
		p["base64"] = base64.StdEncoding.EncodeToString(b)
	}
	return p
}

// decodeValues returns the first n elements of b as JSON values; floats
// that JSON cannot hold (NaN, ±Inf) become strings.
func decodeValues(b []byte, dt wire.DType, n int) []any {
	size := dt.Size()
	if size == 0 {
		return nil
	}
	var out []any
	le := binary.LittleEndian
	for i := 0; i+size <= len(b) && len(out) < n; i += size {
		var v any
		switch dt {
		case wire.F32:
			v = jsonFloat(float64(math.Float32frombits(le.Uint32(b[i:]))))
		case wire.F64:
			v = jsonFloat(math.Float64frombits(le.Uint64(b[i:])))
		case wire.BF16:
			v = jsonFloat(float64(math.Float32frombits(uint32(le.Uint16(b[i:])) << 16)))
		case wire.F16:
			v = jsonFloat(float64(codec.F16ToF32(le.Uint16(b[i:]))))
		case wire.I8:
			v = int8(b[i])
		case wire.U8, wire.Bool:
			v = b[i]
		case wire.I16:
			v = int16(le.Uint16(b[i:]))
		case wire.I32:
			v = int32(le.Uint32(b[i:]))
		case wire.U32:
			v = le.Uint32(b[i:])
		case wire.I64:
			v = int64(le.Uint64(b[i:]))
		case wire.U64:
			v = le.Uint64(b[i:])
		}
		out = append(out, v)
	}
	return out
}

func jsonFloat(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Sprint(f)
	}
	return f
}

// jsonable replaces what encoding/json cannot print (NaN, ±Inf, bins) in a
// free-form value.
func jsonable(v any) any {
	switch x := v.(type) {
	case float64:
		return jsonFloat(x)
	case []byte:
		return map[string]any{"bytes": len(x), "base64": base64.StdEncoding.EncodeToString(x)}
	case []any:
		out := make([]any, len(x))
		for i := range x {
			out[i] = jsonable(x[i])
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, y := range x {
			out[k] = jsonable(y)
		}
		return out
	case map[string]float64:
		out := make(map[string]any, len(x))
		for k, y := range x {
			out[k] = jsonFloat(y)
		}
		return out
	}
	return v
}
