package analysis

import (
	"fmt"
	"io"
	"strings"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/profiler/internal/trace"
)

// MetaLabel is the label of ingest's stats frame that carries a trace's
// NAME.meta.json sidecar (DDP's parameters and buckets).
const MetaLabel = "meta_json"

// streamLoader reads a stream `profiler ingest` wrote: the events of each
// file, then a stats frame saying the file's format, which decides how
// they are laid out (Horovod and BytePS lanes), so a rank's events wait
// for it.
type streamLoader struct {
	name    string
	o       LoadOptions
	byRank  map[int64]*Rank
	order   []int64
	pending map[int64][]trace.Event
}

// loadStream reads the event frames of a stream `profiler ingest` wrote
// (times already on each file's absolute clock) into one Rank per rank
// they name; the ingest's stats frames give each rank its format and
// skipped counts. --rank (o.Rank ≥ 0) puts every event on that rank.
func loadStream(name string, in io.Reader, o LoadOptions) ([]*Rank, error) {
	l := &streamLoader{name: name, o: o, byRank: map[int64]*Rank{}, pending: map[int64][]trace.Event{}}
	rd := wire.NewReader(in, wire.Limits{})
	for {
		f, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		switch f := f.(type) {
		case *wire.Event:
			r := l.rank(f.Rank)
			var ev trace.Event
			trace.FromWire(f, &ev)
			l.pending[r.Rank] = append(l.pending[r.Rank], ev)
		case *wire.Stats:
			if f.Tool == "profiler" && f.Name == "ingest" {
				l.stats(l.rank(f.Rank), f)
			}
		}
	}
	if len(l.order) == 0 {
		return nil, &trace.Error{Msg: name + ": a trainwire stream with no event frames (profiler ingest writes them)", Offset: -1}
	}
	out := make([]*Rank, 0, len(l.order))
	for _, rk := range l.order {
		r := l.byRank[rk]
		l.flush(r, trace.Kineto)
		if r.Format == "" {
			r.Format = trace.Kineto
		}
		if r.Format == trace.Legacy || r.maxTS() < 1e15 {
			r.Clock = "relative"
		}
		out = append(out, r)
	}
	return out, nil
}

// rank is the Rank of rank rk (o.Rank when set), made on first use.
func (l *streamLoader) rank(rk int64) *Rank {
	if l.o.Rank >= 0 {
		rk = l.o.Rank
	}
	r := l.byRank[rk]
	if r == nil {
		r = &Rank{Rank: rk, Files: []string{l.name}, Runtime: map[int64]Span{}, laneIdx: map[string]int{},
			Skipped: map[string]int64{}, Clock: "absolute"}
		l.byRank[rk] = r
		l.order = append(l.order, rk)
	}
	return r
}

// flush adds r's waiting events, read from a file of format fm.
func (l *streamLoader) flush(r *Rank, fm trace.Format) {
	info := &trace.Info{Format: fm, Rank: r.Rank, World: -1}
	for i := range l.pending[r.Rank] {
		r.add(&l.pending[r.Rank][i], l.o.Classifier, info)
		r.Events++
	}
	delete(l.pending, r.Rank)
}

// stats takes a file's format and skipped events from the stats frame
// ingest wrote after its events, and adds those events.
func (l *streamLoader) stats(r *Rank, f *wire.Stats) {
	fm := trace.Format(f.Labels["format"])
	if fm == "" {
		fm = trace.Kineto
	}
	l.flush(r, fm)
	if r.Format == "" || r.Format == trace.Kineto {
		r.Format = fm
	}
	r.Unterminated = r.Unterminated || f.Labels["unterminated"] == "true"
	if m := parseMeta([]byte(f.Labels[MetaLabel])); m != nil && r.Meta == nil {
		r.Meta = m
		if r.World <= 0 {
			r.World = m.World
		}
	}
	for k, v := range f.Values {
		if reason, ok := strings.CutPrefix(k, "skipped."); ok {
			r.Skipped[reason] += int64(v)
		}
	}
}
