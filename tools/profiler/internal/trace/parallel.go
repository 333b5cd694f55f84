package trace

import (
	"errors"
	"sort"

	"trainwire.dev/tools/profiler/internal/jsontok"
)

// The events array is read by a pipeline when Options.Workers ≥ 2:
// a splitter cuts it into batches of whole event objects with the scanner's
// byte-scan (brackets, strings and escapes checked), workers parse the
// batches in parallel with full grammar checks, and Next applies the
// file-level logic (format detection, B/E pairing, counts) in file order.
// Memory stays bounded: a few batches of batchBytes per worker.

const batchBytes = 256 << 10

type batch struct {
	data   []byte  // "[" element "," element … "]"
	starts []int   // where each element starts in data
	offs   []int64 // and in the file
	notObj int64   // array entries that are not objects (skipped)
	end    bool    // the events array ended after this batch
	err    error   // what stopped the splitter, after the elements
	res    chan result
	items  []item
}

type item struct {
	ev            Event
	hasTS, hasDur bool
	off           int64
}

type result struct {
	items []item
	err   error
}

type pipeline struct {
	jobs  chan *batch
	order chan *batch
	free  chan *batch
	done  chan struct{}
	cur   *batch
	res   result
	idx   int
}

func (r *Reader) startPipeline(workers int) {
	pl := &pipeline{
		jobs:  make(chan *batch, 2*workers),
		order: make(chan *batch, 2*workers),
		free:  make(chan *batch, 4*workers+2),
		done:  make(chan struct{}),
	}
	r.pipe = pl
	go r.split(pl)
	for i := 0; i < workers; i++ {
		go r.work(pl)
	}
}

func (pl *pipeline) get() *batch {
	select {
	case b := <-pl.free:
		b.data, b.starts, b.offs = b.data[:0], b.starts[:0], b.offs[:0]
		b.notObj, b.end, b.err = 0, false, nil
		return b
	default:
		return &batch{data: make([]byte, 0, batchBytes+4096), res: make(chan result, 1)}
	}
}

func (pl *pipeline) put(b *batch) {
	select {
	case pl.free <- b:
	default:
	}
}

// split owns the scanner until it sends the batch that ends the array (or
// an error).
func (r *Reader) split(pl *pipeline) {
	defer close(pl.jobs)
	defer close(pl.order)
	for {
		b := pl.get()
		b.data = append(b.data, '[')
		for len(b.data) < batchBytes {
			k, err := r.s.Next()
			if err != nil {
				b.err = err
				break
			}
			if k == jsontok.ArrEnd {
				b.end = true
				break
			}
			if k != jsontok.ObjStart {
				b.notObj++
				if err := r.s.Skip(k); err != nil {
					b.err = err
					break
				}
				continue
			}
			if len(b.starts) > 0 {
				b.data = append(b.data, ',')
			}
			b.starts = append(b.starts, len(b.data))
			b.offs = append(b.offs, r.s.Offset())
			if b.data, err = r.s.AppendValue(k, b.data); err != nil {
				// the broken element goes to a worker with what follows
				// it in the buffer: its full parse names the error a
				// sequential read would
				b.data = append(b.data, r.s.Unread(64<<10)...)
				b.err = err
				break
			}
		}
		if b.err == nil {
			b.data = append(b.data, ']')
		}
		select {
		case pl.order <- b:
		case <-pl.done:
			return
		}
		select {
		case pl.jobs <- b:
		case <-pl.done:
			return
		}
		if b.end || b.err != nil {
			return
		}
	}
}

func (r *Reader) work(pl *pipeline) {
	p := parser{keepArgs: r.opt.KeepArgs, intern: make(map[string]string, 1024)}
	for b := range pl.jobs {
		s := jsontok.NewBytes(b.data, jsontok.Options{MaxToken: r.opt.MaxToken})
		p.s = s
		items := b.items[:0]
		var perr error
		if _, err := s.Next(); err != nil { // '['
			perr = err
		}
		for perr == nil {
			k, err := s.Next()
			if err != nil {
				perr = err
				break
			}
			if k == jsontok.ArrEnd {
				break
			}
			items = append(items, item{})
			it := &items[len(items)-1]
			it.ev.reset()
			it.ev.Args = nil
			it.off = b.fileOffset(s.Offset())
			if it.hasTS, it.hasDur, err = p.fields(&it.ev); err != nil {
				items = items[:len(items)-1]
				perr = err
			}
		}
		if perr != nil {
			perr = b.mapError(perr)
		}
		b.items = items
		b.res <- result{items, perr}
	}
}

// fileOffset maps an offset in the batch to the file.
func (b *batch) fileOffset(local int64) int64 {
	i := sort.Search(len(b.starts), func(i int) bool { return int64(b.starts[i]) > local }) - 1
	if i < 0 {
		return local
	}
	return b.offs[i] + local - int64(b.starts[i])
}

func (b *batch) mapError(err error) error {
	var se *jsontok.SyntaxError
	if errors.As(err, &se) {
		c := *se
		c.Offset = b.fileOffset(se.Offset)
		return &c
	}
	return err
}

// nextParallel returns the next event of the pipeline, or nil, nil when
// the events array has ended (the scanner is the Reader's again).
func (r *Reader) nextParallel() (*Event, error) {
	pl := r.pipe
	for {
		if pl.cur == nil {
			b, ok := <-pl.order
			if !ok {
				return nil, errors.New("trace: internal error: the splitter stopped without a reason")
			}
			pl.cur, pl.res, pl.idx = b, <-b.res, 0
			if b.notObj > 0 {
				r.info.Skipped["not an object"] += b.notObj
			}
		}
		for pl.idx < len(pl.res.items) {
			it := &pl.res.items[pl.idx]
			pl.idx++
			ev, err := r.finish(&it.ev, it.hasTS, it.hasDur, it.off)
			if err != nil {
				return nil, err
			}
			if ev != nil {
				return ev, nil
			}
		}
		if e := pl.cur.err; e != nil {
			// the worker's error on the same bytes, unless it ran out of
			// them before the splitter's error
			var se *jsontok.SyntaxError
			if w := pl.res.err; w != nil && errors.As(e, &se) && errOffset(w) <= se.Offset {
				return nil, w
			}
			return nil, e
		}
		if pl.res.err != nil {
			return nil, pl.res.err
		}
		end := pl.cur.end
		pl.put(pl.cur)
		pl.cur = nil
		if end {
			r.stopPipeline()
			return nil, nil
		}
	}
}

// stopPipeline ends the pipeline's goroutines.
func (r *Reader) stopPipeline() {
	if r.pipe != nil {
		close(r.pipe.done)
		r.pipe = nil
	}
}

func errOffset(err error) int64 {
	var se *jsontok.SyntaxError
	if errors.As(err, &se) {
		return se.Offset
	}
	return 1 << 62
}
