// Package csync runs compressed collectives over a mesh: each rank encodes
// its tensor with error feedback (lib/codec), the ranks exchange the
// encodings with one of Espresso's collectives (lib/collective), and every
// rank decodes and sums them into the same result, bit for bit on every
// rank. `compressor sync` and `compressor serve` run it; docs/compressor.md
// describes the collectives, their results and their byte volumes.
//
// Every collective's result is defined exactly (Reference computes it in
// one process from the ranks' inputs): sums of decoded encodings are taken
// in rank order from +0 (s = ((0 + D₀) + D₁) + …), except where a ring
// accumulates a chunk along the ring (dense, ring, the reduce-scatter of
// rs-ag, PowerSGD's two all-reduces): there chunk k is summed in the
// ring's order k+1, k+2, …, k (collective.RingOrder).
package csync

import (
	"context"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"trainwire.dev/lib/codec"
	"trainwire.dev/lib/collective"
	"trainwire.dev/lib/exit"
	"trainwire.dev/lib/mesh"
	"trainwire.dev/lib/tensor"
	"trainwire.dev/lib/wire"
)

// Collectives, by name.
const (
	// Dense: no compression, lib/collective's ring allreduce (F:AR).
	Dense = "dense"
	// AllGather: C > F:AG* > D. Every rank's frame to every rank, each
	// decoded and summed in rank order.
	AllGather = "allgather"
	// Ring: the ring allreduce in the compressed domain, for summable
	// encodings: fp16 and bf16 (every hop decodes the partial sum and its
	// own chunk, adds in f32 and re-encodes), randomk (shared indices: the
	// values add in f32).
	Ring = "ring"
	// Partitioned: Espresso's divisible scheme C > F1:A2A* > D > C >
	// F2:AG* > D: each rank compresses its tensor in n chunks, rank j
	// receives every rank's chunk j (alltoall), decodes and sums them,
	// re-compresses the sum (its own error feedback, point "ag") and the
	// re-compressed chunks are allgathered and decoded.
	Partitioned = "partitioned"
	// A2AAG: C > F1:A2A* > F2:AG* > D: the alltoall of chunks, then each
	// rank allgathers the n chunk frames it received, undecoded.
	A2AAG = "a2a-ag"
	// A2ADense: C > F1:A2A* > D > F2:AG: the alltoall, the decoded sum of
	// one's chunk, a dense allgather of the sums.
	A2ADense = "a2a-dense"
	// RSAG: F1:RS > C > F2:AG* > D: a dense reduce-scatter, each rank
	// compresses its chunk of the sum, the frames are allgathered.
	RSAG = "rs-ag"
	// PowerSGD: Vogels et al.'s two all-reduces, of P = M·Q and (after
	// orthonormalising P) of Q = Mᵀ·P.
	PowerSGD = "powersgd"
	// Auto picks per codec: dense without one, ring for fp16, bf16 and
	// randomk, powersgd for powersgd, allgather for the rest.
	Auto = "auto"
)

// Collectives lists the collectives a Spec may name (Auto aside).
var Collectives = []string{Dense, AllGather, Ring, Partitioned, A2AAG, A2ADense, RSAG, PowerSGD}

// Spec is how one tensor (or fusion group) is synchronised.
type Spec struct {
	Collective string
	// Codec is nil for Dense.
	Codec codec.Codec
	// Memory is the error feedback (codec.Memories); every compression
	// point of the collective has its own, keyed by tensor and point.
	Memory  string
	MemOpts codec.MemoryOptions
}

// Resolve fills in Auto and checks the pairing of codec and collective.
func (sp Spec) Resolve() (Spec, error) {
	if sp.Collective == Auto || sp.Collective == "" {
		switch {
		case sp.Codec == nil:
			sp.Collective = Dense
		case slices.Contains([]string{"fp16", "bf16", "randomk"}, sp.Codec.Algo()):
			sp.Collective = Ring
		case sp.Codec.Algo() == "powersgd":
			sp.Collective = PowerSGD
		default:
			sp.Collective = AllGather
		}
	}
	if !slices.Contains(Collectives, sp.Collective) {
		return sp, fmt.Errorf("unknown collective %q (known: %s, auto)", sp.Collective, strings.Join(Collectives, ", "))
	}
	if sp.Memory == "" {
		sp.Memory = "none"
	}
	if _, err := codec.NewMemory(sp.Memory, sp.MemOpts); err != nil {
		return sp, err
	}
	if sp.Collective == Dense {
		sp.Codec = nil
		return sp, nil
	}
	if sp.Codec == nil {
		return sp, fmt.Errorf("collective %s needs a codec", sp.Collective)
	}
	algo := sp.Codec.Algo()
	switch sp.Collective {
	case Ring:
		if !slices.Contains([]string{"fp16", "bf16", "randomk"}, algo) {
			return sp, fmt.Errorf("collective ring sums encodings without decoding them: fp16, bf16 or randomk, not %s", algo)
		}
	case PowerSGD:
		if algo != "powersgd" {
			return sp, fmt.Errorf("collective powersgd needs the powersgd codec, not %s", algo)
		}
	default:
		if algo == "powersgd" {
			return sp, fmt.Errorf("the powersgd codec runs with collective powersgd (its two all-reduces), not %s", sp.Collective)
		}
	}
	return sp, nil
}

// Fields describe the spec for the ranks' agreement: name=value lines.
func (sp Spec) Fields() []string {
	algo, params := "none", ""
	if sp.Codec != nil {
		algo = sp.Codec.Algo()
		params = canonParams(sp.Codec.Params())
	}
	o := sp.MemOpts
	return []string{"collective=" + sp.Collective, "algo=" + algo, "params=" + params, "memory=" + sp.Memory,
		fmt.Sprintf("memory-options=beta:%g gamma:%g momentum:%g lr:%g rescale-lr:%g clip:%g", o.Beta, o.Gamma, o.Momentum, o.LR, o.RescaleLR, o.ClipNorm)}
}

func canonParams(p map[string]any) string {
	keys := slices.Sorted(maps.Keys(p))
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%v", k, p[k])
	}
	return b.String()
}

// Unit is one rank's tensor (or fusion group, concatenated) to sync.
type Unit struct {
	Name  string
	Step  int64
	Shape []int64 // nil: 1-D
	Data  []float32
}

func (u *Unit) shape() []int64 {
	if u.Shape == nil {
		return []int64{int64(len(u.Data))}
	}
	return u.Shape
}

// Stats describe one synchronisation.
type Stats struct {
	Collective string
	// Sent and Recv are payload bytes per mesh phase (the control
	// exchanges are under "meta").
	Sent, Recv map[string]int64
	// Times in seconds: encode (with error feedback), comm (the
	// collectives, with the decodes and re-encodes they wait on), total.
	Times map[string]float64
}

// Syncer runs compressed collectives on a mesh, one after the other; all
// ranks must sync the same units, in the same order, with the same Spec.
type Syncer struct {
	// out lends the results' buffers; Release takes them back.
	out  tensor.Pool
	m    *mesh.Mesh
	comm *collective.Comm
	meta *collective.Comm
	n, r int
	seq  int
	// Store holds the error-feedback and codec state of every tensor and
	// compression point (state keys: codec.Encoder's).
	Store *codec.Store
	// MaxBytes bounds a tensor decoded from a peer's frame (--max-payload).
	MaxBytes int64

	// BucketBytes bounds a bucket's input (SyncBatch); 0 is
	// DefaultBucketBytes.
	BucketBytes int
	// NoOverlap runs the buckets one after the other: no encode of bucket
	// b+1 during bucket b's exchange.
	NoOverlap bool

	layouts  map[string][]wire.Part
	layoutMu sync.Mutex
	// storeMu guards Store: the encodes of one bucket run while the
	// previous one is exchanged.
	storeMu sync.Mutex
}

// Release hands results of Sync and SyncBatch back, for later results of
// the same length to reuse without a fresh (zeroed) allocation: results
// the caller has written out and will not touch again. A result that
// Syncer did not allocate (one that aliases other memory) is ignored.
func (s *Syncer) Release(outs ...[]float32) {
	for _, x := range outs {
		s.out.Put(x)
	}
}

// New returns a Syncer on m after the handshake: every rank must pass the
// same hello fields (name=value), or every rank fails with a
// *MismatchError naming a rank that differs and the field.
func New(ctx context.Context, m *mesh.Mesh, hello []string) (*Syncer, error) {
	s := &Syncer{m: m, comm: collective.New(m, collective.Options{}),
		meta: collective.NewWithPhases(m, collective.Options{}, collective.OnePhase("meta")),
		n:    m.World(), r: m.Rank(), Store: codec.NewStore(), MaxBytes: 1 << 34, layouts: map[string][]wire.Part{}}
	fields := append([]string{"protocol=compressor-sync/1", fmt.Sprint("world=", s.n)}, hello...)
	if err := s.agree(ctx, "handshake", fields); err != nil {
		return nil, err
	}
	return s, nil
}

// Rank and World of the mesh.
func (s *Syncer) Rank() int  { return s.r }
func (s *Syncer) World() int { return s.n }

// Mesh returns the mesh.
func (s *Syncer) Mesh() *mesh.Mesh { return s.m }

// MismatchError is a disagreement between ranks about a tensor or the
// configuration; every rank reports it, naming another rank. Exit code 2.
type MismatchError struct {
	Msg string
	// Rank is the other rank; Field what differs, Theirs and Mine its values.
	Rank                int
	Field, Theirs, Mine string
}

func (e *MismatchError) Error() string { return e.Msg }

// ExitCode is 2: the ranks were given inconsistent input or flags.
func (e *MismatchError) ExitCode() int { return exit.BadInput }

// LocalError is a failure of this rank's own input (a NaN, a bad frame):
// the job is aborted so that the others fail at once, naming this rank.
type LocalError struct{ Err error }

func (e *LocalError) Error() string { return e.Err.Error() }
func (e *LocalError) Unwrap() error { return e.Err }

// ExitCode is 2 (bad input).
func (e *LocalError) ExitCode() int { return exit.BadInput }

func (s *Syncer) local(err error) error {
	s.m.Abort(fmt.Errorf("rank %d: %w", s.r, err))
	return &LocalError{err}
}

// Finish checks that every rank's input ended here too (a rank with more
// tensors than the others fails every rank, naming it).
func (s *Syncer) Finish(ctx context.Context) error {
	s.seq++
	return s.agree(ctx, fmt.Sprintf("tensor #%d", s.seq), []string{"tensor=(end of its input)"})
}

// Sync synchronises one unit with spec sp and returns the sum over the
// ranks, a fresh slice (SyncBatch of one unit). u.Data is not modified.
func (s *Syncer) Sync(ctx context.Context, u *Unit, sp Spec) ([]float32, *Stats, error) {
	outs, st, err := s.SyncBatch(ctx, []*Unit{u}, []Spec{sp})
	if err != nil {
		return nil, nil, err
	}
	return outs[0], st, nil
}

func diff(before, after mesh.Counters) (sent, recv map[string]int64) {
	sent, recv = map[string]int64{}, map[string]int64{}
	for ph, pt := range after {
		var s, r int64
		for p, t := range pt {
			s += t.BytesSent
			r += t.BytesRecv
			if b, ok := before[ph]; ok && p < len(b) {
				s -= b[p].BytesSent
				r -= b[p].BytesRecv
			}
		}
		if s != 0 || r != 0 {
			sent[ph], recv[ph] = s, r
		}
	}
	return sent, recv
}

// encoder is the error-feedback encoder of one compression point.
func (s *Syncer) encoder(sp Spec, point string) (*codec.Encoder, error) {
	mem, err := codec.NewMemory(sp.Memory, sp.MemOpts)
	if err != nil {
		return nil, err
	}
	return &codec.Encoder{Codec: sp.Codec, Memory: mem, Store: s.Store, Point: point}, nil
}

// encode compresses in at point; a failure (a NaN) is this rank's.
func (s *Syncer) encode(sp Spec, point string, in codec.Input, st *Stats) (*wire.Compressed, []float32, error) {
	return s.encodeOpt(sp, point, in, st, false)
}

// encodeOpt is encode; with noSent the caller adds its own frame as it
// adds the others' and needs no dense decoded encoding (a sparsifier with
// error feedback then builds none: codec.Encoder.NoSent).
func (s *Syncer) encodeOpt(sp Spec, point string, in codec.Input, st *Stats, noSent bool) (*wire.Compressed, []float32, error) {
	t := time.Now()
	enc, err := s.encoder(sp, point)
	if err != nil {
		return nil, nil, s.local(err)
	}
	enc.NoSent = noSent
	in.Rank = int64(s.r)
	s.storeMu.Lock()
	f, sent, err := enc.Encode(in)
	s.storeMu.Unlock()
	if err != nil {
		return nil, nil, s.local(err)
	}
	if st != nil {
		st.Times["encode"] += time.Since(t).Seconds()
	}
	return f, sent, nil
}

// payload is a frame's parts' bytes, concatenated.
func payload(f *wire.Compressed) []byte {
	if len(f.Parts) == 1 {
		return f.Parts[0].Data
	}
	var b []byte
	for _, p := range f.Parts {
		b = append(b, p.Data...)
	}
	return b
}

// layout returns the parts (data nil) of c's frame for a tensor of shape
// at step: encoded once from zeros and cached. threshold has none (its
// size depends on the data).
func (s *Syncer) layout(c codec.Codec, shape []int64, step int64) ([]wire.Part, error) {
	if c.Algo() == "threshold" {
		return nil, nil
	}
	s.layoutMu.Lock()
	defer s.layoutMu.Unlock()
	stepKey := int64(0)
	if c.Algo() == "dgc" { // warm-up: k depends on the step
		stepKey = step
	}
	key := fmt.Sprint(c.Algo(), "|", canonParams(c.Params()), "|", shape, "|", stepKey)
	if l, ok := s.layouts[key]; ok {
		return l, nil
	}
	d, err := wire.Numel(shape)
	if err != nil {
		return nil, err
	}
	f, err := c.Encode(codec.Input{Name: "layout", Step: step, Shape: shape, Data: make([]float32, d), State: &codec.State{}})
	if err != nil {
		return nil, err
	}
	l := make([]wire.Part, len(f.Parts))
	for i, p := range f.Parts {
		l[i] = wire.Part{Name: p.Name, DType: p.DType, Shape: slices.Clone(p.Shape)}
		l[i].Data = make([]byte, 0, len(p.Data)) // cap holds the length
	}
	if len(s.layouts) > 4096 {
		clear(s.layouts)
	}
	s.layouts[key] = l
	return l, nil
}

// size is the payload size of c's frames for shape at step, or -1 when it
// depends on the data.
func (s *Syncer) size(c codec.Codec, shape []int64, step int64) (int64, error) {
	l, err := s.layout(c, shape, step)
	if err != nil || l == nil {
		return -1, err
	}
	var n int64
	for _, p := range l {
		n += int64(cap(p.Data))
	}
	return n, nil
}

// frameOf rebuilds the frame a peer encoded from its payload b: name,
// step, shape and codec are agreed, so only the parts' bytes travel.
func (s *Syncer) frameOf(c codec.Codec, name string, step int64, shape []int64, rank int, b []byte) (*wire.Compressed, error) {
	f := &wire.Compressed{Name: name, Step: step, Rank: int64(rank), Algo: c.Algo(), Params: c.Params(), DType: wire.F32, Shape: shape}
	if c.Algo() == "threshold" {
		if len(b)%8 != 0 {
			return nil, &codec.FrameError{Name: name, Algo: c.Algo(), Err: fmt.Errorf("rank %d sent %d bytes, not pairs of f32 value and u32 index", rank, len(b))}
		}
		k := int64(len(b) / 8)
		f.Parts = []wire.Part{{Name: "values", DType: wire.F32, Shape: []int64{k}, Data: b[:4*k]},
			{Name: "indices", DType: wire.U32, Shape: []int64{k}, Data: b[4*k:]}}
		return f, nil
	}
	l, err := s.layout(c, shape, step)
	if err != nil {
		return nil, err
	}
	f.Parts = make([]wire.Part, len(l))
	off := 0
	for i, p := range l {
		n := cap(p.Data)
		if off+n > len(b) {
			return nil, &codec.FrameError{Name: name, Algo: c.Algo(), Err: fmt.Errorf("rank %d sent %d bytes, want %d", rank, len(b), off+n)}
		}
		f.Parts[i] = wire.Part{Name: p.Name, DType: p.DType, Shape: p.Shape, Data: b[off : off+n]}
		off += n
	}
	if off != len(b) {
		return nil, &codec.FrameError{Name: name, Algo: c.Algo(), Err: fmt.Errorf("rank %d sent %d bytes, want %d", rank, len(b), off)}
	}
	return f, nil
}

// sparseAlgos decode to zeros but at their indices: their frames are
// added by scatter-add, which equals adding the decoded tensor (the sum
// starts at +0, so it is never −0 and adding +0 changes nothing).
var sparseAlgos = map[string]bool{"topk": true, "mstopk": true, "dgc": true, "threshold": true}

// addSparse scatter-adds a checked frame of one of sparseAlgos into acc.
func addSparse(acc []float32, f *wire.Compressed) {
	vals := f.Parts[0].Data
	idx := f.Parts[1].Data
	for j := 0; j < len(vals)/4; j++ {
		i := binary.LittleEndian.Uint32(idx[4*j:])
		acc[i] += math.Float32frombits(binary.LittleEndian.Uint32(vals[4*j:]))
	}
}

// sumSparse sets acc to the sum of checked frames of sparseAlgos
// (ascending indices, as their checks require) added in rank order to
// zeros, whatever acc held before (a recycled buffer): block by block of
// acc, a block is cleared in a small buffer, every frame's entries of the
// block are added there, and it is copied out. The scattered adds then
// hit a buffer in L1 or L2 instead of missing the caches at nearly every
// add (frame after frame into ResNet-101's 44.5 M elements), and acc is
// written once, in order. Each element's sum is the same as adding the
// frames one after the other to zeros: its addends in rank order.
func sumSparse(acc []float32, frames []*wire.Compressed) {
	const block = 1 << 13 // elements: 32 KiB, in L1 or L2 while summed
	next := make([]int, len(frames))
	tmp := make([]float32, block)
	for lo := 0; lo < len(acc); lo += block {
		hi := min(lo+block, len(acc))
		sum := tmp[:hi-lo]
		clear(sum)
		for r, f := range frames {
			vals, idx := f.Parts[0].Data, f.Parts[1].Data
			j := next[r]
			for ; 4*j < len(idx); j++ {
				i := int(binary.LittleEndian.Uint32(idx[4*j:])) - lo
				if i >= len(sum) {
					break
				}
				sum[i] += math.Float32frombits(binary.LittleEndian.Uint32(vals[4*j:]))
			}
			next[r] = j
		}
		copy(acc[lo:hi], sum)
	}
}

// addFrame adds the tensor f decodes to into acc; scratch is reused.
func (s *Syncer) addFrame(acc []float32, f *wire.Compressed, scratch *[]float32, rank int) error {
	if sparseAlgos[f.Algo] {
		if _, err := codec.FromFrame(f); err != nil {
			return fmt.Errorf("rank %d's frame: %w", rank, err)
		}
		addSparse(acc, f)
		return nil
	}
	if len(*scratch) < len(acc) {
		*scratch = tensor.Alloc(len(acc))
	}
	d := (*scratch)[:len(acc)]
	if _, err := codec.DecodeLimit(f, d, s.MaxBytes); err != nil {
		return fmt.Errorf("rank %d's frame: %w", rank, err)
	}
	tensor.Add(acc, d)
	return nil
}

// counts returns every rank's payload sizes: known from the layout for
// fixed-size codecs, allgathered (phase meta) otherwise. mine holds this
// rank's sizes, the result n·len(mine) sizes, rank-major.
func (s *Syncer) counts(ctx context.Context, fixed bool, mine []int) ([]int, error) {
	k := len(mine)
	out := make([]int, s.n*k)
	if fixed {
		for p := range s.n {
			copy(out[p*k:], mine)
		}
		return out, nil
	}
	b := make([]byte, 0, 8*k)
	for _, v := range mine {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	all := make([]byte, 8*k*s.n)
	cs := make([]int, s.n)
	for i := range cs {
		cs[i] = 8 * k
	}
	if err := s.meta.AllGatherVBytes(ctx, b, cs, all); err != nil {
		return nil, err
	}
	for i := range out {
		v := binary.LittleEndian.Uint64(all[8*i:])
		if v > uint64(s.MaxBytes) {
			return nil, fmt.Errorf("rank %d announces a %d-byte payload, over the limit of %d", i/k, v, s.MaxBytes)
		}
		out[i] = int(v)
	}
	return out, nil
}

func sum(xs []int) int {
	t := 0
	for _, x := range xs {
		t += x
	}
	return t
}

func offsetsOf(xs []int) []int {
	o := make([]int, len(xs)+1)
	for i, x := range xs {
		o[i+1] = o[i] + x
	}
	return o
}

// sortedKeys is for stable output of maps.
func sortedKeys[V any](m map[string]V) []string {
	k := make([]string, 0, len(m))
	for s := range m {
		k = append(k, s)
	}
	sort.Strings(k)
	return k
}
