package wire

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zeebo/xxh3"
)

// Writer writes one stream: a Header on the first Write, the data frames,
// and an End frame on Close. It buffers (64 KiB) and writes payloads straight
// from the caller's slices; call Flush at batch boundaries where a reader
// is waiting. A Writer is not safe for concurrent use.
//
// The End frame says the producer finished: call Close only when it did.
// A producer that fails calls Abort instead (never a deferred Close, which
// would end a failed run's stream as complete, and the next tool in the
// pipe would take it for a success).
type Writer struct {
	bw      *bufio.Writer
	enc     *msgpack.Encoder
	hdr     Header
	started bool
	closed  bool
	aborted bool
	count   int64
	hash    *xxh3.Hasher
	lim     Limits
	err     error
}

// NewWriter returns a Writer whose header names producer (e.g.
// "hashsync/1.0").
func NewWriter(w io.Writer, producer string) *Writer {
	return NewWriterHeader(w, Header{Producer: producer, Schema: SchemaVersion})
}

// NewWriterHeader returns a Writer that opens its stream with h (Schema 0
// means the current schema).
func NewWriterHeader(w io.Writer, h Header) *Writer {
	bw, ok := w.(*bufio.Writer)
	if !ok || bw.Size() < 1<<16 {
		bw = bufio.NewWriterSize(w, 1<<16)
	}
	if h.Schema == 0 {
		h.Schema = SchemaVersion
	}
	return &Writer{bw: bw, enc: msgpack.NewEncoder(bw), hdr: h, hash: xxh3.New(), lim: DefaultLimits}
}

// SetMeta sets the header's metadata; it must be called before the first
// Write.
func (w *Writer) SetMeta(meta map[string]string) { w.hdr.Meta = meta }

// Count returns the number of data frames written so far.
func (w *Writer) Count() int64 { return w.count }

// Write writes one data frame (not a Header or End: the Writer writes
// those), after checking it is consistent (payload sizes, CRCs). A StepEnd
// is written too but not counted (it is structure); EndStep also flushes.
func (w *Writer) Write(f Frame) error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("wire: write after Close")
	}
	switch f.(type) {
	case *Header, *End:
		return fmt.Errorf("wire: Write(%s): the Writer writes headers and ends itself", f.Type())
	}
	if err := f.validate(&w.lim); err != nil {
		return fmt.Errorf("wire: writing %s frame %d: %w", f.Type(), w.count, err)
	}
	if err := w.start(); err != nil {
		return err
	}
	e := encoder{enc: w.enc, bw: w.bw, hash: w.hash}
	if err := e.frame(f); err != nil {
		w.err = fmt.Errorf("wire: writing %s frame: %w", f.Type(), err)
		return w.err
	}
	if !structural(f.Type()) {
		w.count++
	}
	return nil
}

// EndStep writes a StepEnd for step and flushes: a reader waiting for the
// step's answer has all of it.
func (w *Writer) EndStep(step int64) error {
	if err := w.Write(&StepEnd{Step: step}); err != nil {
		return err
	}
	return w.Flush()
}

func (w *Writer) start() error {
	if w.started {
		return nil
	}
	w.started = true
	e := encoder{enc: w.enc, bw: w.bw}
	if err := e.frame(&w.hdr); err != nil {
		w.err = fmt.Errorf("wire: writing header: %w", err)
	}
	return w.err
}

// Flush writes buffered frames to the underlying writer.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("wire: %w", err)
	}
	return w.err
}

// Close writes the End frame (and the Header, for an empty stream) and
// flushes. It does not close the underlying writer. After a failed Write
// or Flush it writes nothing and returns that error (a stream some of
// whose frames are missing must not end as complete); after Abort it
// writes nothing and returns nil.
func (w *Writer) Close() error {
	if w.closed {
		return w.err
	}
	if w.err != nil {
		w.closed = true
		return w.err
	}
	if err := w.start(); err != nil {
		return err
	}
	w.closed = true
	e := encoder{enc: w.enc, bw: w.bw}
	if err := e.frame(&End{Count: w.count, XXH3: w.hash.Sum64()}); err != nil {
		w.err = fmt.Errorf("wire: writing end: %w", err)
		return w.err
	}
	return w.Flush()
}

// Abort ends the stream as failed: it writes e (an error frame saying
// why, when e is not nil), flushes what was written and writes no End
// frame, so every reader reports the stream as truncated, never as
// complete. A header comes first if nothing was written yet, so the error
// frame is readable (dump shows it). Abort after Close does nothing; Close
// after Abort does nothing and returns nil. It returns the write error, if
// any.
func (w *Writer) Abort(e *Error) error {
	if w.closed {
		return nil
	}
	w.closed, w.aborted = true, true
	if w.err != nil {
		return w.err
	}
	if e != nil {
		if err := w.start(); err != nil {
			return err
		}
		en := encoder{enc: w.enc, bw: w.bw, hash: w.hash}
		if err := en.frame(e); err != nil {
			w.err = fmt.Errorf("wire: writing error: %w", err)
			return w.err
		}
	}
	if err := w.bw.Flush(); err != nil {
		w.err = fmt.Errorf("wire: %w", err)
	}
	return w.err
}

// Aborted says whether Abort ended the stream.
func (w *Writer) Aborted() bool { return w.aborted }

// encoder writes frames canonically (docs/wire.md); hash, when set,
// receives every bin value.
type encoder struct {
	enc  *msgpack.Encoder
	bw   *bufio.Writer
	hash *xxh3.Hasher
	err  error
}

func (e *encoder) mapLen(n int) {
	if e.err == nil {
		e.err = e.enc.EncodeMapLen(n)
	}
}

func (e *encoder) arrayLen(n int) {
	if e.err == nil {
		e.err = e.enc.EncodeArrayLen(n)
	}
}

func (e *encoder) str(s string) {
	if e.err == nil {
		e.err = e.enc.EncodeString(s)
	}
}

func (e *encoder) int(v int64) {
	if e.err == nil {
		e.err = e.enc.EncodeInt(v)
	}
}

func (e *encoder) uint(v uint64) {
	if e.err == nil {
		e.err = e.enc.EncodeUint(v)
	}
}

func (e *encoder) float(v float64) {
	if e.err == nil {
		e.err = e.enc.EncodeFloat64(v)
	}
}

func (e *encoder) bool(v bool) {
	if e.err == nil {
		e.err = e.enc.EncodeBool(v)
	}
}

// bin writes b as a msgpack bin (an empty bin for nil), straight from b.
func (e *encoder) bin(b []byte) {
	if e.err != nil {
		return
	}
	if int64(len(b)) > math.MaxUint32 {
		e.err = fmt.Errorf("payload of %d bytes exceeds bin32 (split the tensor)", len(b))
		return
	}
	if e.err = e.enc.EncodeBytesLen(len(b)); e.err != nil {
		return
	}
	_, e.err = e.bw.Write(b)
	if e.hash != nil {
		_, _ = e.hash.Write(b)
	}
}

func (e *encoder) key(k string) { e.str(k) }

// head writes the map header with n keys after t and v.
func (e *encoder) head(typ string, n int) {
	e.mapLen(n + 2)
	e.key("t")
	e.str(typ)
	e.key("v")
	e.int(1)
}

func (e *encoder) shape(s []int64) {
	e.arrayLen(len(s))
	for _, d := range s {
		e.int(d)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func (e *encoder) strMap(m map[string]string) {
	e.mapLen(len(m))
	for _, k := range sortedKeys(m) {
		e.str(k)
		e.str(m[k])
	}
}

func (e *encoder) floatMap(m map[string]float64) {
	e.mapLen(len(m))
	for _, k := range sortedKeys(m) {
		e.str(k)
		e.float(m[k])
	}
}

func (e *encoder) anyMap(m map[string]any) {
	e.mapLen(len(m))
	for _, k := range sortedKeys(m) {
		e.str(k)
		e.any(m[k])
	}
}

// any writes a free-form value: nil, bool, integers, floats (as float64),
// strings, []byte (bin), and slices and string-keyed maps of them.
func (e *encoder) any(v any) {
	switch x := v.(type) {
	case nil:
		if e.err == nil {
			e.err = e.enc.EncodeNil()
		}
	case bool:
		e.bool(x)
	case int:
		e.int(int64(x))
	case int64:
		e.int(x)
	case int32:
		e.int(int64(x))
	case uint64:
		e.uint(x)
	case uint32:
		e.uint(uint64(x))
	case float64:
		e.float(x)
	case float32:
		e.float(float64(x))
	case string:
		e.str(x)
	case []byte:
		e.bin(x)
	case []any:
		e.arrayLen(len(x))
		for _, y := range x {
			e.any(y)
		}
	case []string:
		e.arrayLen(len(x))
		for _, y := range x {
			e.str(y)
		}
	case []int64:
		e.shape(x)
	case []float64:
		e.arrayLen(len(x))
		for _, y := range x {
			e.float(y)
		}
	case map[string]any:
		e.anyMap(x)
	case map[string]string:
		e.strMap(x)
	case map[string]float64:
		e.floatMap(x)
	default:
		if e.err == nil {
			e.err = fmt.Errorf("cannot encode free-form value of type %T", v)
		}
	}
}

func (e *encoder) frame(f Frame) error {
	switch f := f.(type) {
	case *Header:
		e.head(TypeHeader, 3)
		e.key("producer")
		e.str(f.Producer)
		e.key("schema")
		e.int(f.Schema)
		e.key("meta")
		e.strMap(f.Meta)
	case *End:
		e.head(TypeEnd, 2)
		e.key("count")
		e.int(f.Count)
		e.key("xxh3")
		e.uint(f.XXH3)
	case *StepEnd:
		e.head(TypeStepEnd, 1)
		e.key("step")
		e.int(f.Step)
	case *Dense:
		e.head(TypeDense, 6)
		e.tensorID(f.Name, f.Step, f.Rank)
		e.key("dtype")
		e.str(string(f.DType))
		e.key("shape")
		e.shape(f.Shape)
		e.key("data")
		e.bin(f.Data)
	case *Sparse:
		e.sparse(f)
	case *Compressed:
		e.compressed(f)
	case *Event:
		e.event(f)
	case *Model:
		e.model(f)
	case *Plan:
		e.plan(f)
	case *Chunk:
		e.chunk(f)
	case *Stats:
		e.stats(f)
	case *Error:
		e.head(TypeError, 4)
		e.key("code")
		e.str(f.Code)
		e.key("msg")
		e.str(f.Msg)
		e.key("rank")
		e.int(f.Rank)
		e.key("frame")
		e.int(f.Frame)
	default:
		return fmt.Errorf("unknown frame type %T", f)
	}
	return e.err
}

// sparse writes a sparse frame.
func (e *encoder) sparse(f *Sparse) {
	e.head(TypeSparse, 11)
	e.tensorID(f.Name, f.Step, f.Rank)
	e.key("dtype")
	e.str(string(f.DType))
	e.key("shape")
	e.shape(f.Shape)
	e.key("width")
	e.int(f.Width)
	e.key("format")
	e.str(f.Format)
	e.key("itype")
	e.str(string(f.IType))
	e.key("nnz")
	e.int(f.Nnz)
	e.key("indices")
	e.bin(f.Indices)
	e.key("values")
	e.bin(f.Values)
}

// compressed writes a compressed frame and its parts.
func (e *encoder) compressed(f *Compressed) {
	e.head(TypeCompressed, 8)
	e.tensorID(f.Name, f.Step, f.Rank)
	e.key("algo")
	e.str(f.Algo)
	e.key("params")
	e.anyMap(f.Params)
	e.key("dtype")
	e.str(string(f.DType))
	e.key("shape")
	e.shape(f.Shape)
	e.key("parts")
	e.arrayLen(len(f.Parts))
	for i := range f.Parts {
		p := &f.Parts[i]
		e.mapLen(4)
		e.key("name")
		e.str(p.Name)
		e.key("dtype")
		e.str(string(p.DType))
		e.key("shape")
		e.shape(p.Shape)
		e.key("data")
		e.bin(p.Data)
	}
}

// chunk writes a checkpoint chunk frame.
func (e *encoder) chunk(f *Chunk) {
	e.head(TypeChunk, 9)
	e.key("job")
	e.str(f.Job)
	e.key("iter")
	e.int(f.Iter)
	e.key("src_rank")
	e.int(f.SrcRank)
	e.key("replica_of")
	e.int(f.ReplicaOf)
	e.key("offset")
	e.int(f.Offset)
	e.key("len")
	e.int(f.Len)
	e.key("total_len")
	e.int(f.TotalLen)
	e.key("crc32c")
	e.uint(uint64(f.CRC32C))
	e.key("data")
	e.bin(f.Data)
}

// stats writes a stats frame.
func (e *encoder) stats(f *Stats) {
	e.head(TypeStats, 6)
	e.key("tool")
	e.str(f.Tool)
	e.key("name")
	e.str(f.Name)
	e.key("step")
	e.int(f.Step)
	e.key("rank")
	e.int(f.Rank)
	e.key("values")
	e.floatMap(f.Values)
	e.key("labels")
	e.strMap(f.Labels)
}

func (e *encoder) tensorID(name string, step, rank int64) {
	e.key("name")
	e.str(name)
	e.key("step")
	e.int(step)
	e.key("rank")
	e.int(rank)
}

func (e *encoder) event(f *Event) {
	e.head(TypeEvent, 11)
	e.key("name")
	e.str(f.Name)
	e.key("cat")
	e.str(f.Cat)
	e.key("ph")
	e.str(f.Ph)
	e.key("rank")
	e.int(f.Rank)
	e.key("pid")
	e.int(f.PID)
	e.key("tid")
	e.int(f.TID)
	e.key("stream")
	e.int(f.Stream)
	e.key("ts")
	e.int(f.TS)
	e.key("dur")
	e.int(f.Dur)
	e.key("corr")
	e.int(f.Corr)
	e.key("args")
	e.anyMap(f.Args)
}

func (e *encoder) model(f *Model) {
	e.head(TypeModel, 9)
	e.key("name")
	e.str(f.Name)
	e.key("world")
	e.int(f.World)
	e.key("iters")
	e.int(f.Iters)
	e.key("iter_ns")
	e.int(f.IterNS)
	e.key("forward_ns")
	e.int(f.ForwardNS)
	e.key("backward_ns")
	e.int(f.BackwardNS)
	e.key("grads")
	e.arrayLen(len(f.Grads))
	for _, g := range f.Grads {
		e.mapLen(6)
		e.key("name")
		e.str(g.Name)
		e.key("bytes")
		e.int(g.Bytes)
		e.key("numel")
		e.int(g.Numel)
		e.key("dtype")
		e.str(string(g.DType))
		e.key("ready_ns")
		e.int(g.ReadyNS)
		e.key("compute_ns")
		e.int(g.ComputeNS)
	}
	e.key("comm")
	e.arrayLen(len(f.Comm))
	for _, c := range f.Comm {
		e.mapLen(4)
		e.key("op")
		e.str(c.Op)
		e.key("bytes")
		e.int(c.Bytes)
		e.key("ns")
		e.int(c.NS)
		e.key("world")
		e.int(c.World)
	}
	e.key("meta")
	e.anyMap(f.Meta)
}

func (e *encoder) plan(f *Plan) {
	e.head(TypePlan, 7)
	e.key("kind")
	e.str(f.Kind)
	e.key("algo")
	e.str(f.Algo)
	e.key("groups")
	e.arrayLen(len(f.Groups))
	for _, g := range f.Groups {
		e.arrayLen(2)
		e.int(g[0])
		e.int(g[1])
	}
	e.key("items")
	e.arrayLen(len(f.Items))
	for _, it := range f.Items {
		e.anyMap(it)
	}
	e.key("predicted_ns")
	e.int(f.PredictedNS)
	e.key("proven_optimal")
	e.bool(f.ProvenOptimal)
	e.key("meta")
	e.anyMap(f.Meta)
}
