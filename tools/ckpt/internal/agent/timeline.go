package agent

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// timeline writes one JSON line per replication event (ticks, chunks
// written and received) with absolute times in Unix nanoseconds, so the
// checkpoint traffic can be laid against the trainer's own timeline
// (bench/ckpt/timeline.py does). Nil writes nothing.
type timeline struct {
	mu sync.Mutex
	w  io.Writer
}

func (t *timeline) on() bool { return t != nil && t.w != nil }

// event writes {"ev":ev,"rank":rank,k1:v1,…}; values are integers.
func (t *timeline) event(ev string, rank int, kv ...any) {
	if !t.on() {
		return
	}
	b := fmt.Appendf(nil, `{"ev":%q,"rank":%d`, ev, rank)
	for i := 0; i+1 < len(kv); i += 2 {
		switch v := kv[i+1].(type) {
		case time.Time:
			b = fmt.Appendf(b, `,%q:%d`, kv[i], v.UnixNano())
		default:
			b = fmt.Appendf(b, `,%q:%v`, kv[i], v)
		}
	}
	b = append(b, "}\n"...)
	t.mu.Lock()
	_, _ = t.w.Write(b)
	t.mu.Unlock()
}
