package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"trainwire.dev/lib/cli"
	"trainwire.dev/lib/cli/clitest"
	"trainwire.dev/lib/wire"
)

var update = flag.Bool("update", false, "rewrite the golden summaries in testdata/golden")

func TestCLI(t *testing.T) { clitest.Basics(t, "profiler", &CLI{}, run) }

func runCLI(t *testing.T, stdin io.Reader, args ...string) (int, []byte, string) {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errb bytes.Buffer
	code := run(args, stdin, &out, &errb)
	return code, out.Bytes(), errb.String()
}

// fixtures are the trace sets with golden summaries.
var fixtures = []string{
	"synth/kineto-2024", "synth/kineto-2023", "synth/kineto-2022", "synth/kineto-rocm",
	"synth/horovod", "synth/horovod-legacy", "synth/byteps", "ddp-gloo-2", "ddp-gloo-4",
}

// TestGoldenSummaries compares the JSON report of every fixture set with
// testdata/golden (go test -update rewrites them; review the diff).
func TestGoldenSummaries(t *testing.T) {
	for _, fx := range fixtures {
		t.Run(fx, func(t *testing.T) {
			rep := filepath.Join(t.TempDir(), "r.json")
			code, out, errs := runCLI(t, nil, "summary", "--format", "json", "--report", rep, "--instances", filepath.Join("testdata", fx))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			got, err := os.ReadFile(rep)
			if err != nil {
				t.Fatal(err)
			}
			// The report names files as kong resolved them (absolute):
			// make them relative to the package so the goldens hold in
			// any checkout.
			wd, err := os.Getwd()
			if err != nil {
				t.Fatal(err)
			}
			got = bytes.ReplaceAll(got, []byte(wd+string(filepath.Separator)), nil)
			golden := filepath.Join("testdata", "golden", strings.ReplaceAll(fx, "/", "_")+".json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("summary differs from %s (go test -update rewrites it):\n%s", golden, firstDiff(got, want))
			}
			// the frames on stdout are a valid stream of stats frames
			n := 0
			err = cli.EachFrame([]string{"-"}, bytes.NewReader(out), wire.Limits{}, false, func(f wire.Frame) error {
				if _, ok := f.(*wire.Stats); !ok {
					t.Errorf("frame %T", f)
				}
				n++
				return nil
			})
			if err != nil || n == 0 {
				t.Fatalf("%d frames: %v", n, err)
			}
		})
	}
}

func firstDiff(a, b []byte) string {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(la) && i < len(lb); i++ {
		if la[i] != lb[i] {
			return "line " + itoaN(i+1) + ":\n got: " + la[i] + "\nwant: " + lb[i]
		}
	}
	return "lengths differ"
}

// TestVintagesAgree: the same timeline written by four Kineto vintages
// summarizes identically (kernel names and memory events aside).
func TestVintagesAgree(t *testing.T) {
	type view struct {
		Ranks []struct {
			Temporal   any `json:"temporal"`
			Overlap    any `json:"overlap"`
			Idle       any `json:"idle"`
			Launch     any `json:"launch"`
			Iterations any `json:"iterations"`
		} `json:"ranks"`
		Stragglers any `json:"stragglers"`
	}
	var first []byte
	for _, v := range []string{"kineto-2024", "kineto-2023", "kineto-2022", "kineto-rocm"} {
		code, _, errs := runCLI(t, nil, "summary", "--format", "json", "--no-frames", filepath.Join("testdata", "synth", v))
		if code != 0 {
			t.Fatalf("%s: exit %d", v, code)
		}
		var s view
		if err := json.Unmarshal([]byte(errs), &s); err != nil {
			t.Fatalf("%s: %v\n%s", v, err, errs)
		}
		b, _ := json.Marshal(s)
		if first == nil {
			first = b
		} else if !bytes.Equal(b, first) {
			t.Errorf("%s differs from kineto-2024:\n%s\n%s", v, b, first)
		}
	}
}

// TestMalformed: bad JSON exits 2 and names the file and the byte offset.
func TestMalformed(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("testdata/synth/kineto-2024/rank0.pt.trace.json")
	if err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(dir, "trunc.json")
	os.WriteFile(trunc, good[:5000], 0o644)
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, bytes.Replace(good, []byte(`"dur": 900`), []byte(`"dur": 9 00`), 1), 0o644)
	off := bytes.Index(good, []byte(`"dur": 900`)) + len(`"dur": 9`) + 1
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(good[:7000])
	zw.Close()
	truncgz := filepath.Join(dir, "trunc.json.gz")
	os.WriteFile(truncgz, gz.Bytes(), 0o644)
	for _, c := range []struct{ file, want string }{
		{trunc, "at byte 5000"},
		{bad, "at byte " + itoaN(off)},
		{truncgz, "at byte 7000"},
	} {
		for _, verb := range []string{"ingest", "summary", "model"} {
			code, _, errs := runCLI(t, nil, verb, c.file)
			if code != cli.ExitBadInput || !strings.Contains(errs, c.want) || !strings.Contains(errs, filepath.Base(c.file)) {
				t.Errorf("%s %s: exit %d, stderr %q (want exit 2 and %q)", verb, c.file, code, errs, c.want)
			}
		}
	}
}

func itoaN(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// TestIngest: every vintage streams into event frames with absolute ns
// times; the per-file stats frame counts them.
func TestIngest(t *testing.T) {
	for _, v := range []string{"kineto-2024", "kineto-2023", "kineto-2022", "kineto-rocm"} {
		code, out, errs := runCLI(t, nil, "ingest", filepath.Join("testdata", "synth", v))
		if code != 0 {
			t.Fatalf("%s: exit %d %s", v, code, errs)
		}
		var events, stats int
		var step *wire.Event
		err := cli.EachFrame([]string{"-"}, bytes.NewReader(out), wire.Limits{}, false, func(f wire.Frame) error {
			switch f := f.(type) {
			case *wire.Event:
				events++
				if f.Name == "ProfilerStep#0" && f.Rank == 0 {
					step = f
				}
			case *wire.Stats:
				stats++
				if f.Labels["format"] != "kineto" || f.Values["events"] == 0 || f.Values["skipped"] != 0 {
					t.Errorf("%s: stats %+v", v, f)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if stats != 2 || events < 100 || step == nil {
			t.Fatalf("%s: %d events, %d stats, step %v", v, events, stats, step)
		}
		if step.TS != 1700000000000000000 || step.Dur != 900_000 || step.Args["class"] != "annotation" {
			t.Errorf("%s: step %+v", v, step)
		}
	}
	// the parallel pipeline writes the same stream
	for _, fx := range []string{"testdata/ddp-gloo-4", "testdata/synth/horovod-legacy", "testdata/synth/kineto-2023"} {
		c1, o1, _ := runCLI(t, nil, "ingest", fx)
		c3, o3, _ := runCLI(t, nil, "ingest", "--workers", "3", fx)
		if c1 != 0 || c3 != 0 || !bytes.Equal(o1, o3) {
			t.Errorf("%s: --workers 3 writes a different stream (exit %d/%d, %d/%d bytes)", fx, c1, c3, len(o1), len(o3))
		}
	}
	// the count mode reads all and writes nothing on stdout
	code, out, errs := runCLI(t, nil, "ingest", "--count", "testdata/ddp-gloo-4")
	if code != 0 || len(out) != 0 || !strings.Contains(errs, "legacy") || !strings.Contains(errs, "MB/s") {
		t.Fatalf("count: exit %d, %d bytes out, %s", code, len(out), errs)
	}
	// stdin, with --rank
	f, _ := os.Open("testdata/synth/horovod-legacy/timeline.json")
	defer f.Close()
	code, out, errs = runCLI(t, f, "ingest", "--rank", "5", "-")
	if code != 0 || !strings.Contains(errs, "no closing bracket") {
		t.Fatalf("stdin: exit %d %s", code, errs)
	}
	cli.EachFrame([]string{"-"}, bytes.NewReader(out), wire.Limits{}, false, func(f wire.Frame) error {
		if e, ok := f.(*wire.Event); ok && e.Rank != 5 {
			t.Fatalf("rank %d", e.Rank)
		}
		return nil
	})
}

// TestClassRules: a user rule wins over the defaults; a bad one is a usage error.
func TestClassRules(t *testing.T) {
	code, _, errs := runCLI(t, nil, "summary", "--format", "json", "--no-frames", "--class", "comm=^volta_sgemm", "testdata/synth/kineto-2024")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	if !strings.Contains(errs, `"compute_ns": 600000`) { // 960 − 2·180 µs: the sgemm is comm now
		t.Errorf("rule not applied:\n%s", errs)
	}
	if code, _, _ := runCLI(t, nil, "summary", "--class", "nonsense=x", "testdata/synth/kineto-2024"); code != cli.ExitUsage {
		t.Errorf("bad class: exit %d", code)
	}
	if code, _, _ := runCLI(t, nil, "summary", "--class", "comm=(", "testdata/synth/kineto-2024"); code != cli.ExitUsage {
		t.Errorf("bad regex: exit %d", code)
	}
	// without the defaults, nothing is comm and the overlap is null
	code, _, errs = runCLI(t, nil, "summary", "--format", "json", "--no-frames", "--no-default-classes", "--class", "memory=^Memcpy", "testdata/synth/kineto-2024")
	if code != 0 || !strings.Contains(errs, `"pct": null`) {
		t.Errorf("no defaults: exit %d\n%s", code, errs)
	}
}

// TestModelVerb: a trainwire stream with one model frame, JSON the fuser
// reads, and the built-in library.
func TestModelVerb(t *testing.T) {
	code, out, errs := runCLI(t, nil, "model", "testdata/ddp-gloo-2")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	var m *wire.Model
	cli.EachFrame([]string{"-"}, bytes.NewReader(out), wire.Limits{}, false, func(f wire.Frame) error {
		m = f.(*wire.Model)
		return nil
	})
	if m == nil || len(m.Grads) != 8 || m.Grads[3].Name != "fc1.weight" || len(m.Comm) != 12 {
		t.Fatalf("model %+v", m)
	}
	code, out, _ = runCLI(t, nil, "model", "--builtin", "bert-base", "--format", "json", "--quiet", "--batch", "8", "--tflops", "50")
	var j struct {
		Name  string `json:"name"`
		Grads []struct {
			Name  string `json:"name"`
			Bytes int64  `json:"bytes"`
		} `json:"grads"`
	}
	if code != 0 || json.Unmarshal(out, &j) != nil || j.Name != "bert-base" || j.Grads[0].Name != "pooler.dense.bias" || len(j.Grads) != 199 {
		t.Fatalf("builtin json: exit %d %+v", code, j.Name)
	}
	code, out, _ = runCLI(t, nil, "model", "--list")
	for _, n := range []string{"resnet50", "resnet101", "vgg16", "bert-base", "gpt2", "lstm"} {
		if !strings.Contains(string(out), n) {
			t.Errorf("list lacks %s", n)
		}
	}
	if code, _, _ := runCLI(t, nil, "model", "--builtin", "alexnet"); code != cli.ExitUsage {
		t.Errorf("unknown builtin: exit %d", code)
	}
	if code, _, _ := runCLI(t, nil, "model"); code != cli.ExitUsage {
		t.Errorf("no input: exit %d", code)
	}
}

// TestPlot draws PNG and SVG.
func TestPlot(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "t.png")
	if code, _, errs := runCLI(t, nil, "plot", "-o", p, "testdata/ddp-gloo-4"); code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil || img.Bounds().Dx() < 1000 {
		t.Fatalf("png: %v %v", err, img.Bounds())
	}
	s := filepath.Join(dir, "t.svg")
	if code, _, errs := runCLI(t, nil, "plot", "-o", s, "--from-ms", "0.1", "--to-ms", "0.9", "testdata/synth/kineto-2024"); code != 0 {
		t.Fatalf("svg: exit %d %s", code, errs)
	}
	b, _ := os.ReadFile(s)
	if !bytes.Contains(b, []byte("<svg")) || !bytes.Contains(b, []byte("stream 20")) {
		t.Fatal("svg content")
	}
	if code, _, _ := runCLI(t, nil, "plot", "-o", filepath.Join(dir, "x.gif"), "testdata/synth/kineto-2024"); code != cli.ExitUsage {
		t.Errorf("gif: exit %d", code)
	}
	// -o -: the PNG on stdout (a pipe here; a terminal refuses it)
	code, out, errs := runCLI(t, nil, "plot", "-o", "-", "testdata/ddp-gloo-4")
	if code != 0 {
		t.Fatalf("-o -: exit %d %s", code, errs)
	}
	if img, err := png.Decode(bytes.NewReader(out)); err != nil || img.Bounds().Dx() < 1000 {
		t.Fatalf("-o -: png: %v", err)
	}
}

// TestConvert writes valid Chrome/Perfetto JSON with every rank.
func TestConvert(t *testing.T) {
	code, out, errs := runCLI(t, nil, "convert", "--to", "perfetto", "testdata/synth/kineto-2024")
	if code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	var doc struct {
		TraceEvents []struct {
			Ph   string  `json:"ph"`
			Pid  int     `json:"pid"`
			Name string  `json:"name"`
			TS   float64 `json:"ts"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	pids := map[int]bool{}
	var counters int
	for _, e := range doc.TraceEvents {
		pids[e.Pid] = true
		if e.Ph == "C" {
			counters++
		}
	}
	if len(pids) != 2 || counters != 6 || len(doc.TraceEvents) < 50 {
		t.Fatalf("%d events, pids %v, %d counters", len(doc.TraceEvents), pids, counters)
	}
}

// Issue 24 item 9: one rule for a trace's rank. A file with no
// distributedInfo and no rank in its name is rank 0 for ingest as for
// summary (HTA's default), not -1 for one of them.
func TestIngestSummaryRankAgree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "job") // not a number: no BytePS rank directory
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(dir, "trace.json")
	doc := `{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 5, "args": {"stream": 7}}]}`
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runCLI(t, nil, "ingest", f)
	if code != 0 {
		t.Fatalf("ingest: exit %d %s", code, errs)
	}
	ranks := map[int64]bool{}
	err := cli.EachFrame([]string{"-"}, bytes.NewReader(out), wire.Limits{}, false, func(fr wire.Frame) error {
		switch fr := fr.(type) {
		case *wire.Event:
			ranks[fr.Rank] = true
		case *wire.Stats:
			ranks[fr.Rank] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ranks) != 1 || !ranks[0] {
		t.Fatalf("ingest gives ranks %v, want only 0 (as summary does)", ranks)
	}
	code, out, errs = runCLI(t, nil, "summary", f)
	if code != 0 {
		t.Fatalf("summary: exit %d %s", code, errs)
	}
	err = cli.EachFrame([]string{"-"}, bytes.NewReader(out), wire.Limits{}, false, func(fr wire.Frame) error {
		if s, ok := fr.(*wire.Stats); ok && s.Rank != 0 {
			t.Errorf("summary calls it rank %d, ingest 0", s.Rank)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
