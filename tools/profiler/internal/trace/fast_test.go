package trace

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// readTrace reads data with or without the fast path and a given buffer
// size, recording each event, the offset after it and the final error.
type readResult struct {
	evs  []Event
	offs []int64
	info Info
	err  string
}

func readTrace(data []byte, slow, keepArgs bool, bufSize int) readResult {
	tr := NewReader(bytes.NewReader(data), Options{KeepArgs: keepArgs, MaxToken: 1 << 16, MaxOpen: 64, bufSize: bufSize})
	tr.p.slow = slow
	defer tr.Close()
	var res readResult
	for i := 0; i < 1e6; i++ {
		ev, err := tr.Next()
		if err != nil {
			if err != io.EOF {
				res.err = err.Error()
			}
			break
		}
		res.evs = append(res.evs, ev.Clone())
		res.offs = append(res.offs, tr.Offset())
	}
	res.info = *tr.Info()
	return res
}

func diffPaths(t *testing.T, data []byte, bufSize int) {
	t.Helper()
	for _, keep := range []bool{false, true} {
		slow := readTrace(data, true, keep, bufSize)
		fast := readTrace(data, false, keep, bufSize)
		if slow.err != fast.err {
			t.Fatalf("keepArgs=%v buf=%d: errors differ:\nslow: %s\nfast: %s\ninput %q", keep, bufSize, slow.err, fast.err, data)
		}
		if len(slow.evs) != len(fast.evs) {
			t.Fatalf("keepArgs=%v buf=%d: %d events slow, %d fast: %q", keep, bufSize, len(slow.evs), len(fast.evs), data)
		}
		for i := range slow.evs {
			if !reflect.DeepEqual(slow.evs[i], fast.evs[i]) {
				t.Fatalf("keepArgs=%v buf=%d: event %d differs:\nslow %+v\nfast %+v\ninput %q", keep, bufSize, i, slow.evs[i], fast.evs[i], data)
			}
			if slow.offs[i] != fast.offs[i] {
				t.Fatalf("keepArgs=%v buf=%d: offset after event %d: slow %d, fast %d", keep, bufSize, i, slow.offs[i], fast.offs[i])
			}
		}
		if !reflect.DeepEqual(slow.info, fast.info) {
			t.Fatalf("keepArgs=%v buf=%d: info differs:\nslow %+v\nfast %+v", keep, bufSize, slow.info, fast.info)
		}
	}
}

var fastCases = []string{
	`{"traceEvents":[{"ph":"X","name":"k","ts":1.5,"dur":2,"args":{"stream":7,"Input Dims":[[2,3]]}}],"baseTimeNanoseconds":5}`,
	`{"traceEvents":[{"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1234, "tid": 1234, "ts": 4458676522690.655, "dur": 33.774, "args": {"External id": 1, "Record function id": 0, "Input Dims": [[32, 64, 56, 56], [64, 64, 3, 3], [64], [], []], "Input type": ["float", "float", "float", "ScalarList", "ScalarList"], "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]"], "flag": true, "other": false, "none": null}}]}`,
	`{"traceEvents":[{"ph":"X","name":"k\"q","cat":"a\u00e9","ts":"12.5","dur":"3","pid":"CPU functions","tid":"7","id":"0x1f","args":{"Seq":"12","Addr":"0xff","shape":"[2, 3]","name":"lbl","dtype":"Float"}}]}`,
	`{"traceEvents":[{"ph":"X","ts":1e3,"dur":-0.0005,"pid":-3,"tid":12345678901234567890,"args":{"start_time_since_epoch_in_micros":1.0005,"bytes":1E2,"Bytes":12.5}}]}`,
	`{"traceEvents":[{"ph":"X","ts":1.2345678901234,"dur":0.0004999,"args":{"Input Dims":[[1,2],[3]],"Input dims":[[-1, 2]]}},{"ph":"i","ts":01}]}`,
	`{"traceEvents":[{"ph":"X","ts":1,"args":{"Input Dims":[{"a":1},[2]]}},{"ph":"X","ts":1,"args":{"Input Dims":[[2,"x",[3]],[5]]}}]}`,
	`{"traceEvents":[{"ph":"X","ts":1,"args":{"grid":[1 2 3],"x":{"a" "b"}}},{"ph":"X","ts":1 "dur":2}]}`,
	`{"traceEvents":[{"ph":"X","ts":1,"args":{}},{},{"ph":"X",},{"ph":"X","ts":1,"args":{"a":[1,2}}]}`,
	`{"traceEvents":[{"ph":"X","ts":1,"args":{"a":"\x01"}}]}`,
	`{"traceEvents":[{ "ph" : "X" , "ts" : 1 , "args" : { "stream" : 7 } } ]}`,
	"[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"start_time_since_epoch_in_micros\":1}},\n{\"name\":\"NEGOTIATE_ALLREDUCE\",\"ph\":\"B\",\"ts\":1,\"pid\":1},\n{\"ph\":\"E\",\"ts\":2,\"pid\":1,\"args\":{\"shape\":\"[2, 3]\"}},\n",
	`{"TensorReadyTraceEvents":[{"name":"g","ts":3}]}`,
	`{"traceEvents":[{"ph":"X","ts":1,"dur":2,"args":{"a":tru}}]}`,
	`{"traceEvents":[{"ph":"X","ts":1,"dur":2,"args":{"a":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}}]}`,
	`{"traceEvents":[{"ph":"X","ts":1,"dur":2,"args":{"a":"x\\y","b":["\u12"]}}]}`,
}

// TestFastPathMatches reads the fixtures and hand-written edge cases with
// and without the fast path, whole and through small buffers.
func TestFastPathMatches(t *testing.T) {
	var docs [][]byte
	for _, c := range fastCases {
		docs = append(docs, []byte(c))
	}
	err := filepath.Walk(filepath.Join("..", "..", "testdata"), func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() && strings.HasSuffix(p, ".json") && fi.Size() < 4<<20 {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			docs = append(docs, b)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range docs {
		for _, bs := range []int{0, 7, 64, 1000} {
			t.Run(fmt.Sprint(i, "/", bs), func(t *testing.T) { diffPaths(t, d, bs) })
		}
		// every truncation of the small cases
		if i < len(fastCases) {
			for n := range d {
				diffPaths(t, d[:n], 0)
			}
		}
	}
}

// FuzzFastPath checks that the fast path gives the same events, offsets,
// info and errors as token-by-token reading.
func FuzzFastPath(f *testing.F) {
	for _, c := range fastCases {
		f.Add([]byte(c), uint8(0))
	}
	f.Fuzz(func(t *testing.T, data []byte, bs uint8) {
		size := 0
		if bs != 0 {
			size = int(bs%64) + 1
		}
		diffPaths(t, data, size)
	})
}
