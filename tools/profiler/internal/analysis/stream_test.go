package analysis

import (
	"bytes"
	"testing"

	"trainwire.dev/lib/wire"
	"trainwire.dev/tools/profiler/internal/classify"
)

// FuzzLoadStream: any bytes read as an ingested stream give ranks or an
// error, never a panic.
func FuzzLoadStream(f *testing.F) {
	var b bytes.Buffer
	w := wire.NewWriter(&b, "profiler/test")
	_ = w.Write(&wire.Event{Name: "k", Cat: "kernel", Ph: "X", Rank: 1, PID: 0, TID: 7, Stream: 7, TS: 10, Dur: 5, Corr: 3,
		Args: map[string]any{"in_numel": 12.0, "Collective name": "allreduce", "pid_name": "p"}})
	_ = w.Write(&wire.Stats{Tool: "profiler", Name: "ingest", Rank: 1, Labels: map[string]string{"format": "kineto", MetaLabel: `{"world_size": 2}`}})
	_ = w.Close()
	f.Add(b.Bytes())
	c, err := classify.New(nil, false)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ranks, err := loadStream("fuzz", bytes.NewReader(in), LoadOptions{Classifier: c, Rank: -1})
		if err == nil && len(ranks) == 0 {
			t.Fatal("no ranks and no error")
		}
		for _, r := range ranks {
			r.finish()
		}
	})
}
