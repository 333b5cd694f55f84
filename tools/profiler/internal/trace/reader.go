package trace

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"trainwire.dev/lib/exit"
	"trainwire.dev/tools/profiler/internal/jsontok"
)

// Options tune a Reader.
type Options struct {
	// KeepArgs keeps every scalar arg in Event.Args (ingest does; the
	// analyses only need the fields pulled out of args).
	KeepArgs bool
	// MaxToken bounds one JSON string or number (default 64 MiB).
	MaxToken int
	// MaxOpen bounds the B events waiting for their E (default 1<<20).
	MaxOpen int
	// Workers parse the events array in parallel when ≥ 2 (a splitter
	// goroutine cuts it into batches of whole events); 0 or 1 reads on the
	// caller's goroutine.
	Workers int

	// bufSize is the scanner's buffer size (tests: small buffers make
	// events straddle refills).
	bufSize int
}

// Info is what a Reader learned about its file. Fields filled from keys
// after traceEvents are only complete once Next returned io.EOF.
type Info struct {
	Format Format
	// Rank is distributedInfo.rank (-1 when the file has none).
	Rank  int64
	World int64
	// Backend is distributedInfo.backend.
	Backend string
	// BaseNS is baseTimeNanoseconds (Kineto) or Horovod's start time since
	// the epoch, in ns; 0 when the file has none.
	BaseNS int64
	// BaseLate: BaseNS was read after the events (older Kineto key order).
	BaseLate bool
	// Events counts the events returned.
	Events int64
	// Skipped counts events skipped, by reason.
	Skipped map[string]int64
	// Unterminated: the top-level array had no closing bracket (Horovod ≤ 0.20).
	Unterminated bool
	// Names maps pids to process names (Horovod: tensor names).
	Names map[int64]string
}

// SkippedTotal returns the number of skipped events.
func (i *Info) SkippedTotal() int64 {
	var n int64
	for _, v := range i.Skipped {
		n += v
	}
	return n
}

// Error is a malformed trace: what and where.
type Error struct {
	Offset int64
	Msg    string
	Err    error
}

// ExitCode: a malformed trace is bad input (2).
func (e *Error) ExitCode() int { return exit.BadInput }

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	return fmt.Sprintf("trace: %s at byte %d", e.Msg, e.Offset)
}

// Unwrap returns the JSON error, if any.
func (e *Error) Unwrap() error { return e.Err }

type open struct {
	ev Event
}

type pidtid struct{ pid, tid int64 }

// Reader streams normalized events out of one trace file.
type Reader struct {
	s      *jsontok.Scanner
	p      parser
	opt    Options
	info   Info
	state  uint8 // 0 start, 1 in events (object form), 2 in events (array form), 3 after events, 4 done
	ev     Event
	out    Event // a paired B/E
	opens  map[pidtid][]Event
	nOpen  int
	pipe   *pipeline
	piped  bool
	failed error
	// isTensorReady: the array being read is TensorReadyTraceEvents.
	isTensorReady bool
	sawEvents     bool
	// keys are the first top-level keys that say nothing about a trace
	// (for the message when there is no traceEvents).
	keys     []string
	moreKeys bool
}

// NewReader returns a Reader of r (already decompressed).
func NewReader(r io.Reader, opt Options) *Reader {
	if opt.MaxOpen <= 0 {
		opt.MaxOpen = 1 << 20
	}
	s := jsontok.New(r, jsontok.Options{BufSize: opt.bufSize, MaxToken: opt.MaxToken, Unterminated: true})
	return &Reader{
		s:     s,
		p:     parser{s: s, keepArgs: opt.KeepArgs, intern: make(map[string]string, 1024)},
		opt:   opt,
		info:  Info{Rank: -1, World: -1, Skipped: map[string]int64{}, Names: map[int64]string{}},
		opens: map[pidtid][]Event{},
	}
}

// Info returns what the Reader has learned so far.
func (r *Reader) Info() *Info { return &r.info }

// Offset returns the number of bytes consumed so far.
func (r *Reader) Offset() int64 { return r.s.Pos() }

// parser reads event objects from a scanner; each goroutine that parses
// has its own (its own intern table).
type parser struct {
	s        *jsontok.Scanner
	keepArgs bool
	intern   map[string]string
	// slow turns the fast path off (tests compare both).
	slow bool
	// recent caches interned strings by a cheap hash of their bytes.
	recent [256]string
}

func (r *parser) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	// a direct-mapped cache in front of the map: the few names and
	// categories that make most events cost a compare, not a hash
	h := (uint(len(b))*0x9e3779b1 ^ uint(b[0])<<3 ^ uint(b[len(b)-1])<<7 ^ uint(b[len(b)>>1])) % uint(len(r.recent))
	if s := r.recent[h]; s == string(b) {
		return s
	}
	s, ok := r.intern[string(b)]
	if !ok {
		s = string(b)
		if len(r.intern) < 1<<20 && len(b) <= 4096 {
			r.intern[s] = s
		}
	}
	r.recent[h] = s
	return s
}

func (r *Reader) errf(off int64, format string, a ...any) error {
	return &Error{Offset: off, Msg: fmt.Sprintf(format, a...)}
}

func wrapJSON(err error) error {
	var se *jsontok.SyntaxError
	if errors.As(err, &se) {
		return &Error{Offset: se.Offset, Err: err}
	}
	return err
}

func (r *Reader) skip(reason string) { r.info.Skipped[reason]++ }

// Next returns the next event, valid until the next call, or io.EOF after
// the last one. A malformed file gives an *Error naming the byte offset.
func (r *Reader) Next() (*Event, error) {
	if r.failed != nil {
		return nil, r.failed
	}
	ev, err := r.next()
	if err != nil {
		r.stopPipeline()
		if err != io.EOF {
			r.failed = wrapJSON(err)
			return nil, r.failed
		}
	}
	return ev, err
}

func (r *Reader) next() (*Event, error) {
	for {
		switch r.state {
		case 0:
			if err := r.start(); err != nil {
				return nil, err
			}
		case 1, 2:
			if r.pipe == nil && !r.piped && r.workers() > 1 {
				r.piped = true
				r.startPipeline(r.workers())
			}
			if r.pipe != nil {
				ev, err := r.nextParallel()
				if err != nil {
					return nil, err
				}
				if ev != nil {
					r.info.Events++
					return ev, nil
				}
				r.endArray()
				continue
			}
			k, err := r.s.Next()
			if err != nil {
				return nil, err
			}
			if k == jsontok.ArrEnd {
				r.endArray()
				continue
			}
			if k != jsontok.ObjStart {
				r.skip("not an object")
				if err := r.s.Skip(k); err != nil {
					return nil, err
				}
				continue
			}
			ev, err := r.event()
			if err != nil {
				return nil, err
			}
			if ev != nil {
				r.info.Events++
				return ev, nil
			}
		case 3:
			if err := r.topKeys(); err != nil {
				return nil, err
			}
		case 4:
			if k, err := r.s.Next(); err != nil {
				return nil, err
			} else if k != jsontok.EOF {
				return nil, r.errf(r.s.Offset(), "unexpected %v after the trace", k)
			}
			if err := r.notATrace(); err != nil {
				return nil, err
			}
			return nil, io.EOF
		}
	}
}

// notATrace is the error for a JSON file that holds no trace: an object
// without a traceEvents array (a model, a config, a metrics dump), or an
// array none of whose values is an event object. Such a file is not an
// empty trace: summarizing it as 0 events, exit 0, let a wrong file pass
// for a run that did nothing.
func (r *Reader) notATrace() error {
	if !r.sawEvents {
		keys := "it is empty"
		if len(r.keys) > 0 {
			keys = "its keys: " + strings.Join(r.keys, ", ")
			if r.moreKeys {
				keys += ", …"
			}
		}
		return &Error{Err: fmt.Errorf("not a trace: a JSON object with no traceEvents array (%s)", keys)}
	}
	if n := r.info.Skipped["not an object"]; r.info.Events == 0 && n > 0 && n == r.info.SkippedTotal() {
		return &Error{Err: fmt.Errorf("not a trace: an array of %d values, none of them an event object", n)}
	}
	return nil
}

// endArray moves past the events array.
func (r *Reader) endArray() {
	if r.s.ClosedLeniently() {
		r.info.Unterminated = true
	}
	r.closeOpens()
	r.piped = false
	if r.state == 1 {
		r.state = 3
	} else {
		r.state = 4
	}
}

func (r *Reader) workers() int { return r.opt.Workers }

// Close stops the Reader's goroutines (a Reader read to io.EOF or an
// error has none left).
func (r *Reader) Close() { r.stopPipeline() }

func (r *Reader) start() error {
	k, err := r.s.Next()
	if err != nil {
		return err
	}
	switch k {
	case jsontok.ArrStart:
		r.state = 2
		r.sawEvents = true
		return nil
	case jsontok.ObjStart:
		r.info.Format = Kineto
		r.state = 3
		return nil
	}
	return r.errf(r.s.Offset(), "a trace is a JSON object or array, found %v", k)
}

// topKeys reads top-level keys of the object form until traceEvents (state
// 1) or the end of the object (state 4).
func (r *Reader) topKeys() error {
	for {
		k, err := r.s.Next()
		if err != nil {
			return err
		}
		if k == jsontok.ObjEnd {
			r.state = 4
			return nil
		}
		key := r.s.Bytes()
		switch string(key) {
		case "traceEvents", "TensorReadyTraceEvents":
			r.isTensorReady = string(key) == "TensorReadyTraceEvents"
			k, err := r.s.Next()
			if err != nil {
				return err
			}
			if k != jsontok.ArrStart {
				return r.errf(r.s.Offset(), "traceEvents is %v, not an array", k)
			}
			r.sawEvents = true
			r.state = 1
			return nil
		case "distributedInfo":
			if err := r.distributedInfo(); err != nil {
				return err
			}
		case "baseTimeNanoseconds":
			k, err := r.s.Next()
			if err != nil {
				return err
			}
			if k == jsontok.Number {
				if v, ok := jsontok.ParseScaled(r.s.Bytes(), 0); ok {
					r.info.BaseNS = v
					r.info.BaseLate = r.info.Events > 0
				}
			} else if err := r.s.Skip(k); err != nil {
				return err
			}
		default:
			if len(r.keys) < 6 {
				r.keys = append(r.keys, strconv.Quote(string(key)))
			} else {
				r.moreKeys = true
			}
			k, err := r.s.Next()
			if err != nil {
				return err
			}
			if err := r.s.Skip(k); err != nil {
				return err
			}
		}
	}
}

func (r *Reader) distributedInfo() error {
	k, err := r.s.Next()
	if err != nil {
		return err
	}
	if k != jsontok.ObjStart {
		return r.s.Skip(k)
	}
	for {
		k, err := r.s.Next()
		if err != nil {
			return err
		}
		if k == jsontok.ObjEnd {
			return nil
		}
		key := string(r.s.Bytes())
		k, err = r.s.Next()
		if err != nil {
			return err
		}
		switch {
		case key == "rank" && k == jsontok.Number:
			r.info.Rank, _ = jsontok.ParseScaled(r.s.Bytes(), 0)
		case key == "world_size" && k == jsontok.Number:
			r.info.World, _ = jsontok.ParseScaled(r.s.Bytes(), 0)
		case key == "backend" && k == jsontok.String:
			r.info.Backend = string(r.s.Bytes())
		default:
			if err := r.s.Skip(k); err != nil {
				return err
			}
		}
	}
}

// maxDurNS drops CUPTI-overflow events, as HTA does (7 days).
const maxDurNS = 7 * 24 * 3600 * 1e9

// event reads one event object (its '{' consumed). It returns nil for an
// event that was skipped or is waiting for its E.
func (r *Reader) event() (*Event, error) {
	ev := &r.ev
	ev.reset()
	off := r.s.Offset()
	hasTS, hasDur, err := r.p.fields(ev)
	if err != nil {
		return nil, err
	}
	return r.finish(ev, hasTS, hasDur, off)
}

// fields reads an event object's fields (its '{' consumed) into ev.
func (r *parser) fields(ev *Event) (hasTS, hasDur bool, err error) {
	if !r.slow {
		if hasTS, hasDur, ok := r.fastFields(ev); ok {
			return hasTS, hasDur, nil
		}
		ev.reset()
	}
	for {
		k, err := r.s.Next()
		if err != nil {
			return false, false, err
		}
		if k == jsontok.ObjEnd {
			break
		}
		key := r.s.Bytes()
		// the key's bytes die with the next token: switch first
		var field int
		switch string(key) {
		case "name":
			field = 1
		case "cat":
			field = 2
		case "ph":
			field = 3
		case "ts":
			field = 4
		case "dur":
			field = 5
		case "pid":
			field = 6
		case "tid":
			field = 7
		case "id":
			field = 8
		case "args":
			field = 9
		}
		k, err = r.s.Next()
		if err != nil {
			return false, false, err
		}
		b := r.s.Bytes()
		switch {
		case field == 1 && k == jsontok.String:
			ev.Name = r.str(b)
		case field == 2 && k == jsontok.String:
			ev.Cat = r.str(b)
		case field == 3 && k == jsontok.String && len(b) > 0:
			ev.Ph = b[0]
		case field == 4 && k == jsontok.Number:
			ev.TS, hasTS = r.s.Scaled(3)
		case field == 4 && k == jsontok.String:
			ev.TS, hasTS = jsontok.ParseScaled(b, 3)
		case field == 5 && k == jsontok.Number:
			ev.Dur, hasDur = r.s.Scaled(3)
		case field == 5 && k == jsontok.String:
			ev.Dur, hasDur = jsontok.ParseScaled(b, 3)
		case field == 6 && k == jsontok.Number:
			ev.PID, _ = r.s.Scaled(0)
		case field == 6 && k == jsontok.String:
			ev.PIDName = r.str(b)
			if v, ok := jsontok.ParseInt(b); ok {
				ev.PID = v
			}
		case field == 7 && k == jsontok.Number:
			ev.TID, _ = r.s.Scaled(0)
		case field == 7 && k == jsontok.String:
			ev.TIDName = r.str(b)
			if v, ok := jsontok.ParseInt(b); ok {
				ev.TID = v
			}
		case field == 8 && k == jsontok.Number:
			ev.FlowID, _ = r.s.Scaled(0)
		case field == 8 && k == jsontok.String:
			ev.FlowID = parseID(b)
		case field == 9 && k == jsontok.ObjStart:
			if err := r.args(ev); err != nil {
				return false, false, err
			}
		default:
			if err := r.s.Skip(k); err != nil {
				return false, false, err
			}
		}
	}
	return hasTS, hasDur, nil
}

// finish applies the file-level logic to a parsed event: format
// detection, metadata, B/E pairing, validity. It returns nil for an event
// that was skipped or is waiting for its E.
func (r *Reader) finish(ev *Event, hasTS, hasDur bool, off int64) (*Event, error) {
	if ev.epochNS != 0 && r.info.Events == 0 && r.info.BaseNS == 0 {
		r.info.BaseNS = ev.epochNS
	}
	if r.isTensorReady {
		// Espresso/BytePS tensor_ready.json: {name, ts}
		if !hasTS {
			r.skip("no timestamp")
			return nil, nil
		}
		ev.Ph, ev.Cat = 'i', "tensor_ready"
		r.detect(ev)
		return ev, nil
	}
	if ev.Ph == 0 {
		r.skip("no phase")
		return nil, nil
	}
	if ev.Ph == 'I' {
		ev.Ph = 'i'
	}
	r.detect(ev)
	switch ev.Ph {
	case 'M':
		if ev.Name == "process_name" && ev.Label != "" && ev.PID >= 0 && len(r.info.Names) < 1<<20 {
			r.info.Names[ev.PID] = ev.Label
		}
		return ev, nil
	case 'X', 'i', 's', 'f', 't', 'C':
	case 'B':
		if !hasTS {
			r.skip("no timestamp")
			return nil, nil
		}
		if r.nOpen >= r.opt.MaxOpen {
			return nil, r.errf(off, "more than %d B events without their E", r.opt.MaxOpen)
		}
		key := pidtid{ev.PID, ev.TID}
		r.opens[key] = append(r.opens[key], ev.Clone())
		r.nOpen++
		return nil, nil
	case 'E':
		key := pidtid{ev.PID, ev.TID}
		st := r.opens[key]
		if len(st) == 0 {
			r.skip("E without B")
			return nil, nil
		}
		b := st[len(st)-1]
		r.opens[key] = st[:len(st)-1]
		r.nOpen--
		r.out = b
		r.out.Ph = 'X'
		r.out.Dur = ev.TS - b.TS
		if ev.InNumel >= 0 {
			r.out.InNumel = ev.InNumel
		}
		if ev.DType != "" {
			r.out.DType = ev.DType
		}
		if r.opt.KeepArgs {
			r.out.Args = append(r.out.Args, ev.Args...)
		}
		if r.out.Dur < 0 {
			r.skip("E before B")
			return nil, nil
		}
		r.horovod(&r.out)
		return &r.out, nil
	default:
		r.skip("phase " + string(rune(ev.Ph)))
		return nil, nil
	}
	if !hasTS && ev.Ph != 'M' {
		r.skip("no timestamp")
		return nil, nil
	}
	if ev.Ph == 'X' {
		if !hasDur {
			ev.Dur = 0
		}
		if ev.Dur < 0 || ev.Dur > maxDurNS {
			r.skip("duration out of range")
			return nil, nil
		}
	}
	r.horovod(ev)
	return ev, nil
}

// horovod names Horovod events by their tensor and marks negotiation ticks.
func (r *Reader) horovod(ev *Event) {
	if r.info.Format != Horovod {
		return
	}
	if ev.PIDName == "" {
		ev.PIDName = r.info.Names[ev.PID]
	}
	if ev.Cat == "" {
		ev.Cat = "horovod"
	}
	if ev.Ph == 'X' && ev.Dur == 0 && ev.Name != "" && allDigits(ev.Name) {
		ev.Cat = "horovod_tick"
		ev.Label = ev.Name // the rank that reported ready
	}
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

// detect settles the format from the first decisive event.
func (r *Reader) detect(ev *Event) {
	if r.isTensorReady {
		r.info.Format = BytePS
		return
	}
	if r.info.Format == Kineto && (ev.TIDName == "total" || strings.HasPrefix(ev.PIDName, "Comm.")) {
		r.info.Format = BytePS // BytePS writes the object form too
		return
	}
	if r.info.Format != "" && r.info.Format != Chrome {
		return
	}
	switch {
	case r.isTensorReady:
		r.info.Format = BytePS
	case ev.Ph == 'M' && ev.Name == "process_name" && r.info.BaseNS != 0 && r.state == 2:
		r.info.Format = Horovod
	case ev.PIDName == "CPU functions" || ev.PIDName == "CUDA functions":
		r.info.Format = Legacy
	case ev.TIDName == "total" || strings.HasPrefix(ev.PIDName, "Comm."):
		r.info.Format = BytePS
	case r.state == 2 && (ev.Ph == 'B' || ev.Ph == 'E') && ev.TID < 0 && strings.HasPrefix(ev.Name, "NEGOTIATE_"):
		r.info.Format = Horovod
	case r.state == 2:
		r.info.Format = Chrome
	}
}

// closeOpens counts B events that never got their E.
func (r *Reader) closeOpens() {
	if r.nOpen > 0 {
		r.info.Skipped["B without E"] += int64(r.nOpen)
		r.opens = map[pidtid][]Event{}
		r.nOpen = 0
	}
}

func parseID(b []byte) int64 {
	if v, ok := jsontok.ParseInt(b); ok {
		return v
	}
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		var v int64
		for _, c := range b[2:] {
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | int64(c-'0')
			case c >= 'a' && c <= 'f':
				v = v<<4 | int64(c-'a'+10)
			case c >= 'A' && c <= 'F':
				v = v<<4 | int64(c-'A'+10)
			default:
				return -1
			}
		}
		return v
	}
	return -1
}
