package codec

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// State is the per-tensor state of a codec and its memory: named float32
// slots of the tensor's size ("e" the residual, "u" and "v" DGC's momentum
// and accumulator, "m" Signum's momentum, "q" PowerSGD's warm-start Q).
type State struct {
	Slots map[string][]float32
}

// Slot returns slot name, creating it zeroed with n elements when it is
// missing or has another length.
func (s *State) Slot(name string, n int) []float32 {
	if s.Slots == nil {
		s.Slots = map[string][]float32{}
	}
	v, ok := s.Slots[name]
	if !ok || len(v) != n {
		v = tensor.Alloc(n)
		s.Slots[name] = v
	}
	return v
}

// Has reports whether slot name exists with n elements.
func (s *State) Has(name string, n int) bool {
	v, ok := s.Slots[name]
	return ok && len(v) == n
}

// Store holds the State of every tensor by name.
type Store struct {
	m map[string]*State
}

// NewStore returns an empty store.
func NewStore() *Store { return &Store{m: map[string]*State{}} }

// Get returns the state of tensor name, creating it.
func (s *Store) Get(name string) *State {
	st, ok := s.m[name]
	if !ok {
		st = &State{}
		s.m[name] = st
	}
	return st
}

// Len returns the number of tensors with state.
func (s *Store) Len() int { return len(s.m) }

// StateSep separates the tensor name from the slot name in a state
// stream's frame names: "layer1.weight@e".
const StateSep = "@"

// WriteTo writes the store as dense f32 frames named "<tensor>@<slot>",
// sorted by name, to w (which the caller closes).
func (s *Store) WriteTo(w *wire.Writer) error {
	names := make([]string, 0, len(s.m))
	for n := range s.m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		st := s.m[n]
		slots := make([]string, 0, len(st.Slots))
		for k := range st.Slots {
			slots = append(slots, k)
		}
		sort.Strings(slots)
		for _, k := range slots {
			if err := w.Write(wire.NewDenseF32(n+StateSep+k, st.Slots[k])); err != nil {
				return err
			}
		}
	}
	return nil
}

// ReadStore reads a state stream written by WriteTo (any number of
// streams, until EOF).
func ReadStore(r *wire.Reader) (*Store, error) {
	s := NewStore()
	for {
		f, err := r.Next()
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		d, ok := f.(*wire.Dense)
		if !ok {
			return nil, fmt.Errorf("codec: state stream: %s frame, want dense", f.Type())
		}
		i := strings.LastIndex(d.Name, StateSep)
		if i < 0 {
			return nil, fmt.Errorf("codec: state stream: frame %q has no %q separating tensor and slot", d.Name, StateSep)
		}
		if d.DType != wire.F32 {
			return nil, fmt.Errorf("codec: state stream: frame %q is %s, want f32", d.Name, d.DType)
		}
		x, err := d.F32()
		if err != nil {
			return nil, err
		}
		st := s.Get(d.Name[:i])
		if st.Slots == nil {
			st.Slots = map[string][]float32{}
		}
		st.Slots[d.Name[i+1:]] = x
	}
}
