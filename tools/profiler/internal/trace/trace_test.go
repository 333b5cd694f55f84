package trace

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"trainwire.dev/tools/profiler/internal/jsontok"
)

func readAll(t testing.TB, r io.Reader) ([]Event, *Info, error) {
	return readAllW(r, 0)
}

func readAllW(r io.Reader, workers int) ([]Event, *Info, error) {
	tr := NewReader(r, Options{KeepArgs: true, Workers: workers})
	defer tr.Close()
	var evs []Event
	for {
		ev, err := tr.Next()
		if err == io.EOF {
			return evs, tr.Info(), nil
		}
		if err != nil {
			return evs, tr.Info(), err
		}
		evs = append(evs, ev.Clone())
	}
}

func readFile(t *testing.T, path string) ([]Event, *Info) {
	t.Helper()
	in, closeIn, err := Open(filepath.Join("..", "..", "testdata", path), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer closeIn()
	evs, info, err := readAll(t, in)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return evs, info
}

func TestFormats(t *testing.T) {
	cases := []struct {
		path   string
		format Format
		rank   int64
		base   int64
	}{
		{"synth/kineto-2024/rank0.pt.trace.json", Kineto, 0, 1695541323477309345},
		{"synth/kineto-2023/rank1.pt.trace.json", Kineto, 1, 1695541323477309345},
		{"synth/kineto-2022/rank0.pt.trace.json", Kineto, 0, 0},
		{"synth/kineto-rocm/rank1.pt.trace.json.gz", Kineto, 1, 1695541323477309345},
		{"synth/horovod/timeline.json", Horovod, -1, 1700000000000000000},
		{"synth/horovod-legacy/timeline.json", Horovod, -1, 1700000000000000000},
		{"synth/byteps/traces/0/comm.json", BytePS, -1, 0},
		{"synth/byteps/traces/0/tensor_ready.json", BytePS, -1, 0},
		{"ddp-gloo-2/rank-0.json", Legacy, -1, 0},
		{"ddp-gloo-4/rank-3.json.gz", Legacy, -1, 0},
	}
	for _, c := range cases {
		evs, info := readFile(t, c.path)
		if info.Format != c.format || info.Rank != c.rank || info.BaseNS != c.base {
			t.Errorf("%s: format %s rank %d base %d, want %s %d %d", c.path, info.Format, info.Rank, info.BaseNS, c.format, c.rank, c.base)
		}
		if len(evs) == 0 || info.SkippedTotal() != 0 {
			t.Errorf("%s: %d events, skipped %v", c.path, len(evs), info.Skipped)
		}
	}
}

// TestNanoseconds: relative float µs with a ns fraction become exact int64 ns.
func TestNanoseconds(t *testing.T) {
	evs, info := readFile(t, "synth/kineto-2024/rank0.pt.trace.json")
	if evs[0].Name != "ProfilerStep#0" || evs[0].TS != 4458676522690655 || evs[0].Dur != 900000 {
		t.Fatalf("first event %+v", evs[0])
	}
	if evs[0].TS+info.BaseNS != 1700000000000000000 {
		t.Fatalf("absolute %d", evs[0].TS+info.BaseNS)
	}
	old, _ := readFile(t, "synth/kineto-2022/rank0.pt.trace.json")
	if old[0].TS != 1700000000000000000 {
		t.Fatalf("2022 absolute µs: %d", old[0].TS)
	}
}

func TestHorovodPairs(t *testing.T) {
	for _, p := range []string{"synth/horovod/timeline.json", "synth/horovod-legacy/timeline.json"} {
		evs, info := readFile(t, p)
		if info.Unterminated != strings.Contains(p, "legacy") {
			t.Errorf("%s: unterminated %v", p, info.Unterminated)
		}
		var ticks, nccl int
		for _, e := range evs {
			if e.Cat == "horovod_tick" {
				ticks++
			}
			if e.Name == "NCCL_ALLREDUCE" {
				nccl++
				if e.PIDName == "" || e.Ph != 'X' {
					t.Errorf("%s: %+v", p, e)
				}
			}
			if e.Name == "ALLREDUCE" && e.InNumel != 262144 && e.InNumel != 2560 {
				t.Errorf("%s: shape numel %d", p, e.InNumel)
			}
		}
		if ticks != 8 || nccl != 4 {
			t.Errorf("%s: %d ticks, %d NCCL_ALLREDUCE", p, ticks, nccl)
		}
	}
}

// TestSkipped: unknown or unusable events are skipped and counted.
func TestSkipped(t *testing.T) {
	doc := `{"traceEvents":[
	 {"ph":"X","name":"ok","ts":1,"dur":2,"pid":1,"tid":1},
	 {"ph":"Z","name":"unknown phase","ts":1},
	 {"name":"no phase","ts":1},
	 {"ph":"X","name":"no ts","dur":1},
	 {"ph":"X","name":"overflow","ts":1,"dur":1e15},
	 {"ph":"E","ts":5},
	 {"ph":"B","name":"open","ts":5,"pid":1,"tid":1},
	 3, "a string", null,
	 {"ph":"X","name":"weird fields","ts":1,"dur":1,"pid":{"x":1},"args":[1,2],"cat":7}
	]}`
	evs, info, err := readAll(t, strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || evs[0].Name != "ok" || evs[1].Name != "weird fields" {
		t.Fatalf("events %+v", evs)
	}
	want := map[string]int64{"phase Z": 1, "no phase": 1, "no timestamp": 1, "duration out of range": 1,
		"E without B": 1, "B without E": 1, "not an object": 3}
	for k, v := range want {
		if info.Skipped[k] != v {
			t.Errorf("skipped[%q] = %d, want %d (all: %v)", k, info.Skipped[k], v, info.Skipped)
		}
	}
}

// TestErrorOffsets: malformed and truncated traces name the byte offset.
func TestErrorOffsets(t *testing.T) {
	cases := []struct {
		doc   string
		off   int64
		trunc bool
	}{
		{`{"traceEvents":[{"ph":"X","ts":1,}]}`, 33, false},
		{`{"traceEvents":[{"ph":"X","ts":1}`, 33, true},
		{`{"traceEvents":[{"ph":"X","ts":1},{"ph":"X","ts":`, 49, true},
		{`{"traceEvents":[{"ph":"X","ts":01}]}`, 31, false},
		{`{"traceEvents":[{"ph":"X","ts":1}]} x`, 36, false},
		{`{"traceEvents":{"ph":"X"}}`, 15, false},
		{`[{"ph":"X","ts":1},{"ph"`, 24, true},
		{`"a trace?"`, 0, false},
	}
	for _, c := range cases {
		_, _, err := readAll(t, strings.NewReader(c.doc))
		var te *Error
		if !errors.As(err, &te) {
			t.Fatalf("%s: error %v is not a *trace.Error", c.doc, err)
		}
		if te.Offset != c.off {
			t.Errorf("%s: offset %d, want %d (%v)", c.doc, te.Offset, c.off, err)
		}
		if errors.Is(err, jsontok.ErrTruncated) != c.trunc {
			t.Errorf("%s: truncated = %v (%v)", c.doc, !c.trunc, err)
		}
		if !strings.Contains(err.Error(), "byte") {
			t.Errorf("%s: message %q names no byte", c.doc, err)
		}
	}
}

func TestRankFromName(t *testing.T) {
	for name, want := range map[string]int64{"rank-3.json": 3, "x/worker0.rank_12.pt.trace.json.gz": 12, "traces/2/comm.json": 2,
		"RANK7.json": 7, "trace.json": -1} {
		if got := RankFromName(name); got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
}

// TestParallelSame: the pipeline gives the events, info and errors of a
// sequential read, on every fixture and on a trace of many batches.
func TestParallelSame(t *testing.T) {
	var docs [][]byte
	for _, p := range []string{"synth/kineto-2024/rank0.pt.trace.json", "synth/kineto-2022/rank1.pt.trace.json",
		"synth/horovod/timeline.json", "synth/horovod-legacy/timeline.json", "synth/byteps/traces/0/comm.json",
		"synth/byteps/traces/0/tensor_ready.json", "ddp-gloo-2/rank-1.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", p))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, b)
	}
	// many batches, an escape, a non-object entry and a broken event far in
	var big bytes.Buffer
	big.WriteString(`{"traceEvents":[`)
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&big, `{"ph":"X","cat":"kernel","name":"k\u00e9%d","ts":%d.5,"dur":3,"pid":0,"tid":7,"args":{"stream":7,"correlation":%d,"grid":[1,2,3]}},`, i%7, i*10, i)
		if i == 12345 {
			big.WriteString(`"not an event",`)
		}
	}
	good := append(append([]byte(nil), big.Bytes()[:big.Len()-1]...), []byte("]}")...)
	docs = append(docs, good)
	bad := append([]byte(nil), good...)
	i := bytes.Index(bad, []byte(`"ts":150000.5`))
	bad[i+5] = 'x' // ts:1x0000.5 in event 15000
	docs = append(docs, bad, good[:len(good)/2])
	for n, d := range docs {
		seq, si, serr := readAllW(bytes.NewReader(d), 1)
		par, pi, perr := readAllW(bytes.NewReader(d), 3)
		if (serr == nil) != (perr == nil) || serr != nil && serr.Error() != perr.Error() {
			t.Fatalf("doc %d: errors differ: %v / %v", n, serr, perr)
		}
		if len(seq) != len(par) {
			t.Fatalf("doc %d: %d events sequential, %d parallel", n, len(seq), len(par))
		}
		for j := range seq {
			if !reflect.DeepEqual(seq[j], par[j]) {
				t.Fatalf("doc %d event %d: %+v / %+v", n, j, seq[j], par[j])
			}
		}
		if si.Format != pi.Format || si.BaseNS != pi.BaseNS || si.Events != pi.Events || !reflect.DeepEqual(si.Skipped, pi.Skipped) || si.Unterminated != pi.Unterminated {
			t.Fatalf("doc %d: info %+v / %+v", n, si, pi)
		}
	}
}

func FuzzReader(f *testing.F) {
	f.Add([]byte(`{"traceEvents":[{"ph":"X","name":"k","ts":1.5,"dur":2,"args":{"stream":7,"Input Dims":[[2,3]]}}],"baseTimeNanoseconds":5}`))
	f.Add([]byte("[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"start_time_since_epoch_in_micros\":1}},\n{\"name\":\"NEGOTIATE_ALLREDUCE\",\"ph\":\"B\",\"ts\":1,\"pid\":1},\n{\"ph\":\"E\",\"ts\":2,\"pid\":1,\"args\":{\"shape\":\"[2, 3]\"}},\n"))
	f.Add([]byte(`{"TensorReadyTraceEvents":[{"name":"g","ts":3}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// sequential and parallel reads agree on what they deliver and on
		// whether the trace is broken
		seq, _, serr := readAllW(bytes.NewReader(data), 1)
		par, _, perr := readAllW(bytes.NewReader(data), 2)
		if (serr == nil) != (perr == nil) || len(seq) != len(par) {
			t.Fatalf("sequential %d events, %v; parallel %d events, %v", len(seq), serr, len(par), perr)
		}
		tr := NewReader(bytes.NewReader(data), Options{KeepArgs: true, MaxToken: 1 << 16, MaxOpen: 64})
		defer tr.Close()
		for i := 0; i < 1e6; i++ {
			ev, err := tr.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				var te *Error
				if !errors.As(err, &te) && !strings.Contains(err.Error(), "reading") {
					t.Fatalf("error without an offset: %v", err)
				}
				return
			}
			if ev.Ph == 'X' && (ev.Dur < 0 || ev.Dur > maxDurNS) {
				t.Fatalf("bad duration %d", ev.Dur)
			}
		}
	})
}
