package wire

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"trainwire.dev/lib/exit"
)

// MaxModelJSON bounds a hand-written .json timing model.
const MaxModelJSON = 256 << 20

// ReadModel reads the timing model the planners (fuser, compressor plan)
// take from in, called name in errors: the first model frame of a
// trainwire stream (what `profiler model` writes), or one JSON object
// with the model frame's keys (name, world, iters, iter_ns, forward_ns,
// grads[{name, bytes, numel, dtype, ready_ns, compute_ns}], comm[{op,
// bytes, ns, world}]) written by hand. JSON is told from a stream by its
// first byte ('{' or white space, which no stream starts with); a name
// ending in .json is always read as JSON. Malformed input is an error
// with exit code 2 naming name.
func ReadModel(name string, in io.Reader, lim Limits) (*Model, error) {
	br := bufio.NewReaderSize(in, 1<<16)
	if strings.HasSuffix(name, ".json") || looksJSON(br) {
		return readJSONModel(name, br)
	}
	r := NewReader(br, lim)
	var m *Model
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if mf, ok := f.(*Model); ok && m == nil {
			m = mf
		}
	}
	if m == nil {
		return nil, exit.BadInputf("%s: no model frame in the stream", name)
	}
	return m, nil
}

// looksJSON says whether br starts with '{' or white space (it waits for
// the first byte only).
func looksJSON(br *bufio.Reader) bool {
	b, err := br.Peek(1)
	if err != nil {
		return false
	}
	switch b[0] {
	case '{', ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

func readJSONModel(name string, in io.Reader) (*Model, error) {
	b, err := io.ReadAll(io.LimitReader(in, MaxModelJSON+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxModelJSON {
		return nil, exit.WithCode(exit.BadInput, fmt.Errorf("%s: a JSON model larger than %d bytes", name, MaxModelJSON))
	}
	var raw jsonModel
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, exit.WithCode(exit.BadInput, fmt.Errorf("%s: %v", name, err))
	}
	m := raw.model()
	return &m, nil
}

// jsonModel is the model frame's keys, for models written by hand.
type jsonModel struct {
	Name      string `json:"name"`
	World     int64  `json:"world"`
	Iters     int64  `json:"iters"`
	IterNS    int64  `json:"iter_ns"`
	ForwardNS int64  `json:"forward_ns"`
	Grads     []struct {
		Name      string `json:"name"`
		Bytes     int64  `json:"bytes"`
		Numel     int64  `json:"numel"`
		DType     string `json:"dtype"`
		ReadyNS   int64  `json:"ready_ns"`
		ComputeNS int64  `json:"compute_ns"`
	} `json:"grads"`
	Comm []struct {
		Op    string `json:"op"`
		Bytes int64  `json:"bytes"`
		NS    int64  `json:"ns"`
		World int64  `json:"world"`
	} `json:"comm"`
}

func (j jsonModel) model() Model {
	m := Model{Name: j.Name, World: j.World, Iters: j.Iters, IterNS: j.IterNS, ForwardNS: j.ForwardNS}
	for _, g := range j.Grads {
		m.Grads = append(m.Grads, Grad{Name: g.Name, Bytes: g.Bytes, Numel: g.Numel, DType: DType(g.DType),
			ReadyNS: g.ReadyNS, ComputeNS: g.ComputeNS})
	}
	for _, c := range j.Comm {
		m.Comm = append(m.Comm, CommSample{Op: c.Op, Bytes: c.Bytes, NS: c.NS, World: c.World})
	}
	return m
}
