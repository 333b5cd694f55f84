// Package analysis holds one rank's trace in a compact form and computes
// Holistic-Trace-Analysis-grade analyses on it: temporal breakdown,
// comm/compute overlap, idle time split into host wait / kernel wait /
// other, kernel breakdown, launch statistics, cross-rank collective
// matching with skew and bandwidth, straggler ranking, and the memory
// timeline.
package analysis

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"trainwire.dev/tools/profiler/internal/classify"
	"trainwire.dev/tools/profiler/internal/trace"
)

// Span is one complete event, as the analyses need it.
type Span struct {
	TS, End int64
	Name    string
	Class   classify.Class
	// Lane is the GPU stream, or the CPU thread / Horovod tensor / BytePS
	// partition; LaneName says which.
	Lane  int
	GPU   bool
	Corr  int64
	ExtID int64
	Coll  string
	Bytes int64
	PG    string
	Seq   int64
	Group int64
	// Numel is the element count of the first input (AccumulateGrad) or
	// the tensor (Horovod), -1 when unknown.
	Numel int64
	DType string
	// Tensor is the Horovod tensor / BytePS gradient the span belongs to.
	Tensor string
}

// Dur returns End − TS.
func (s *Span) Dur() int64 { return s.End - s.TS }

// Mem is one memory event.
type Mem struct {
	TS        int64
	Device    int64
	Bytes     int64
	Allocated int64
	Reserved  int64
}

// Tick is a Horovod negotiation tick: Rank reported Tensor ready at TS.
type Tick struct {
	TS     int64
	Tensor string
	Rank   int64
}

// Ready is a tensor-ready event (BytePS/Espresso tensor_ready.json).
type Ready struct {
	TS   int64
	Name string
}

// Meta is the sidecar record_ddp.py writes next to a legacy trace
// (rank-N.meta.json): the parameters and DDP's buckets, which a legacy
// trace does not carry.
type Meta struct {
	Rank        int64        `json:"rank"`
	World       int64        `json:"world_size"`
	Backend     string       `json:"backend"`
	Params      []MetaParam  `json:"params"`
	BucketCapMB float64      `json:"bucket_cap_mb"`
	Buckets     []MetaBucket `json:"buckets"`
}

// MetaParam is a parameter in registration order.
type MetaParam struct {
	Name  string `json:"name"`
	Numel int64  `json:"numel"`
	DType string `json:"dtype"`
}

// MetaBucket is a DDP bucket in reduction order.
type MetaBucket struct {
	Params []string `json:"params"`
	Bytes  int64    `json:"bytes"`
}

// Rank is one rank's trace.
type Rank struct {
	Rank   int64
	Files  []string
	Format trace.Format
	// Clock is "absolute" (epoch, comparable across ranks) or "relative"
	// (each rank's own origin: legacy traces).
	Clock   string
	World   int64
	Backend string
	Spans   []Span
	Steps   []Span
	// Runtime maps correlation ids to their launching runtime call.
	Runtime map[int64]Span
	Mem     []Mem
	Ticks   []Tick
	Ready   []Ready
	Lanes   []string
	Meta    *Meta
	Events  int64
	Skipped map[string]int64
	// Unterminated: a file's top-level array had no closing bracket.
	Unterminated bool

	laneIdx map[string]int
}

func (r *Rank) lane(name string) int {
	if i, ok := r.laneIdx[name]; ok {
		return i
	}
	r.laneIdx[name] = len(r.Lanes)
	r.Lanes = append(r.Lanes, name)
	return len(r.Lanes) - 1
}

// HasGPU reports whether the rank has device-stream events.
func (r *Rank) HasGPU() bool {
	for i := range r.Spans {
		if r.Spans[i].GPU {
			return true
		}
	}
	return false
}

// LoadOptions control Load.
type LoadOptions struct {
	Classifier *classify.Classifier
	// Rank overrides the rank of a single file (-1: from the file).
	Rank  int64
	Stdin io.Reader
	// MaxToken bounds one JSON token.
	MaxToken int
	// Workers parse events in parallel (trace.Options.Workers).
	Workers int
	// Progress, if set, is called with each file's size once it is read.
	Progress func(bytes int64)
}

// Load reads trace files into ranks (files of the same rank merge),
// sorted by rank. Rank comes from distributedInfo, then the file name,
// then the order of the files.
func Load(files []string, o LoadOptions) ([]*Rank, error) {
	byRank := map[int64]*Rank{}
	for fi, f := range files {
		rs, err := loadFile(f, fi, o)
		if err != nil {
			return nil, err
		}
		if st, err := os.Stat(f); err == nil && o.Progress != nil {
			o.Progress(st.Size())
		}
		for _, r := range rs {
			if prev := byRank[r.Rank]; prev != nil {
				prev.merge(r)
			} else {
				byRank[r.Rank] = r
			}
		}
	}
	var out []*Rank
	for _, r := range byRank {
		r.finish()
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Rank < out[j].Rank })
	for _, r := range out {
		if r.World <= 0 {
			r.World = int64(len(out))
		}
	}
	return out, nil
}

func (r *Rank) merge(o *Rank) {
	r.Files = append(r.Files, o.Files...)
	off := len(r.Lanes)
	for i := range o.Spans {
		o.Spans[i].Lane += off
	}
	r.Lanes = append(r.Lanes, o.Lanes...)
	for i, n := range o.Lanes {
		r.laneIdx[n] = off + i
	}
	r.Spans = append(r.Spans, o.Spans...)
	r.Steps = append(r.Steps, o.Steps...)
	for k, v := range o.Runtime {
		r.Runtime[k] = v
	}
	r.Mem = append(r.Mem, o.Mem...)
	r.Ticks = append(r.Ticks, o.Ticks...)
	r.Ready = append(r.Ready, o.Ready...)
	r.Events += o.Events
	for k, v := range o.Skipped {
		r.Skipped[k] += v
	}
	r.Unterminated = r.Unterminated || o.Unterminated
	if r.Meta == nil {
		r.Meta = o.Meta
	}
	if o.Format != "" && (r.Format == "" || r.Format == trace.Kineto && o.Format != trace.Kineto) {
		r.Format = o.Format
	}
}

func (r *Rank) finish() {
	sort.SliceStable(r.Spans, func(i, j int) bool { return r.Spans[i].TS < r.Spans[j].TS })
	sort.Slice(r.Steps, func(i, j int) bool { return r.Steps[i].TS < r.Steps[j].TS })
	sort.Slice(r.Mem, func(i, j int) bool { return r.Mem[i].TS < r.Mem[j].TS })
	sort.Slice(r.Ticks, func(i, j int) bool { return r.Ticks[i].TS < r.Ticks[j].TS })
	sort.Slice(r.Ready, func(i, j int) bool { return r.Ready[i].TS < r.Ready[j].TS })
	r.commBytes()
	if r.Meta != nil && len(r.Meta.Buckets) > 0 {
		r.bucketBytes()
	}
	if r.Format == trace.Horovod && len(r.Ticks) > 0 && r.World <= 0 {
		seen := map[int64]bool{}
		for _, t := range r.Ticks {
			seen[t.Rank] = true
		}
		r.World = int64(len(seen))
	}
	if r.Format == trace.Horovod {
		// the shape rides on the response span's E: give every span of
		// the tensor its size
		size := map[string]int64{}
		for i := range r.Spans {
			if s := &r.Spans[i]; s.Bytes > 0 {
				size[s.Tensor] = s.Bytes
			}
		}
		for i := range r.Spans {
			if s := &r.Spans[i]; s.Bytes <= 0 {
				s.Bytes = size[s.Tensor]
			}
		}
	}
}

// commBytes gives device collectives without message sizes (NCCL kernels
// before 2023 carry none) the size of the host op that launched them (same
// External id): record_param_comms, else a nccl:* annotation (sized from
// its Input Dims). Such a kernel also takes the annotation's operation
// (nccl:all_to_all runs as ncclDevKernel_SendRecv, which would read as
// sendrecv).
func (r *Rank) commBytes() {
	byExt := map[int64]*Span{}
	for i := range r.Spans {
		s := &r.Spans[i]
		if s.GPU || s.ExtID < 0 || s.Class != classify.Comm || (s.Bytes <= 0 && !strings.HasPrefix(s.Name, "nccl:")) {
			continue
		}
		if prev, ok := byExt[s.ExtID]; !ok || prev.Name != "record_param_comms" {
			byExt[s.ExtID] = s
		}
	}
	if len(byExt) == 0 {
		return
	}
	for i := range r.Spans {
		s := &r.Spans[i]
		if !s.GPU || s.Class != classify.Comm {
			continue
		}
		c, ok := byExt[s.ExtID]
		if !ok {
			continue
		}
		if s.Bytes <= 0 {
			s.Bytes = c.Bytes
		}
		if s.Coll == "" {
			s.Coll = c.Coll
			if s.Coll == "" && strings.HasPrefix(c.Name, "nccl:") {
				s.Coll = OpName(&Span{Name: strings.TrimPrefix(c.Name, "nccl:")})
			}
		}
	}
}

// bucketBytes gives the k-th collective of each iteration the size of
// DDP's k-th bucket (legacy traces carry no message sizes).
func (r *Rank) bucketBytes() {
	idx := r.Collectives()
	k, step := 0, -2
	for _, i := range idx {
		s := &r.Spans[i]
		if s.Bytes > 0 {
			continue
		}
		st := r.StepOf(s.TS)
		if st != step {
			step, k = st, 0
		}
		s.Bytes = r.Meta.Buckets[k%len(r.Meta.Buckets)].Bytes
		k++
	}
}

// StepOf returns the index of the step containing ts, or -1.
func (r *Rank) StepOf(ts int64) int {
	i := sort.Search(len(r.Steps), func(i int) bool { return r.Steps[i].End > ts })
	if i < len(r.Steps) && r.Steps[i].TS <= ts {
		return i
	}
	return -1
}

// loadFile reads one file: a trace (one rank), or a stream `profiler
// ingest` wrote (the ranks it holds).
func loadFile(name string, index int, o LoadOptions) ([]*Rank, error) {
	in, closeIn, err := trace.Open(name, o.Stdin)
	if err != nil {
		return nil, err
	}
	defer closeIn()
	if trace.IsStream(in) {
		return loadStream(name, in, o)
	}
	r, err := loadTrace(name, index, in, o)
	if err != nil {
		return nil, err
	}
	return []*Rank{r}, nil
}

// loadTrace reads one JSON trace.
func loadTrace(name string, index int, in io.Reader, o LoadOptions) (*Rank, error) {
	base, tailRank := int64(-1), int64(-1)
	if name != "-" {
		base, tailRank = trace.Tail(name)
	}
	tr := trace.NewReader(in, trace.Options{MaxToken: o.MaxToken, Workers: o.Workers})
	defer tr.Close()
	r := &Rank{Rank: -1, Files: []string{name}, Runtime: map[int64]Span{}, laneIdx: map[string]int{}}
	info := tr.Info()
	for {
		ev, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		r.add(ev, o.Classifier, info)
	}
	r.Format = info.Format
	r.Events = info.Events
	r.Skipped = info.Skipped
	r.Unterminated = info.Unterminated
	r.World = info.World
	r.Backend = info.Backend
	if info.BaseNS == 0 && base > 0 {
		info.BaseNS = base
	}
	r.Rank = trace.ResolveRank(o.Rank, info, tailRank, name, index)
	r.Clock = "absolute"
	if info.Format == trace.Legacy || (info.BaseNS == 0 && r.maxTS() < 1e15) {
		r.Clock = "relative"
	}
	if info.BaseNS != 0 {
		r.shift(info.BaseNS)
	}
	if name != "-" {
		r.Meta = readMeta(name)
		if r.Meta != nil && r.World <= 0 {
			r.World = r.Meta.World
		}
	}
	return r, nil
}

func (r *Rank) maxTS() int64 {
	var m int64
	for i := range r.Spans {
		m = max(m, r.Spans[i].TS)
	}
	return m
}

func (r *Rank) shift(d int64) {
	for i := range r.Spans {
		r.Spans[i].TS += d
		r.Spans[i].End += d
	}
	for i := range r.Steps {
		r.Steps[i].TS += d
		r.Steps[i].End += d
	}
	for k, v := range r.Runtime {
		v.TS += d
		v.End += d
		r.Runtime[k] = v
	}
	for i := range r.Mem {
		r.Mem[i].TS += d
	}
	for i := range r.Ticks {
		r.Ticks[i].TS += d
	}
	for i := range r.Ready {
		r.Ready[i].TS += d
	}
}

// readMeta reads NAME.meta.json beside a trace (rank-0.json →
// rank-0.meta.json), if there is one.
func readMeta(name string) *Meta {
	return parseMeta(MetaJSON(name))
}

// MetaJSON is the text of NAME.meta.json beside a trace (at most 64 MiB),
// or nil when there is none: `profiler ingest` carries it in its stream.
func MetaJSON(name string) []byte {
	base := strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".json")
	f, err := os.Open(base + ".meta.json")
	if err != nil {
		return nil
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<20))
	if err != nil {
		return nil
	}
	return b
}

// parseMeta decodes a sidecar's text; nil when there is none or it is
// not one.
func parseMeta(b []byte) *Meta {
	if len(b) == 0 {
		return nil
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil
	}
	return &m
}

func (r *Rank) add(ev *trace.Event, c *classify.Classifier, info *trace.Info) {
	switch ev.Ph {
	case 'i':
		switch {
		case ev.Name == "[memory]" && (ev.Bytes != -1 || ev.TotalAllocated >= 0):
			r.Mem = append(r.Mem, Mem{TS: ev.TS, Device: ev.Device, Bytes: ev.Bytes, Allocated: ev.TotalAllocated, Reserved: ev.TotalReserved})
		case ev.Cat == "tensor_ready":
			r.Ready = append(r.Ready, Ready{TS: ev.TS, Name: ev.Name})
		}
		return
	case 'X':
	default:
		return
	}
	if ev.Cat == "horovod_tick" {
		var rk int64
		fmt.Sscan(ev.Label, &rk)
		r.Ticks = append(r.Ticks, Tick{TS: ev.TS, Tensor: ev.PIDName, Rank: rk})
		return
	}
	cl := c.Classify(ev.Name, ev.Cat, ev.Ph)
	s := Span{TS: ev.TS, End: ev.End(), Name: ev.Name, Class: cl, Corr: ev.Corr, ExtID: ev.ExtID, Coll: ev.Coll, PG: ev.PG,
		Seq: ev.Seq, Group: ev.GroupSize, Numel: ev.InNumel, DType: ev.DType, Bytes: ev.Bytes}
	if ev.InNelems >= 0 {
		s.Bytes = ev.InNelems * dtypeSize(ev.DType)
	}
	if s.Bytes <= 0 && cl == classify.Comm && s.Numel > 0 {
		// a collective op whose size is only in its Input Dims (nccl:*
		// annotations): the first input's elements (f32 when the trace
		// names no dtype)
		s.Bytes = s.Numel * dtypeSize(s.DType)
	}
	if cl == classify.Runtime {
		if ev.Corr >= 0 {
			r.Runtime[ev.Corr] = s
		}
		return
	}
	if cl == classify.Annotation {
		if strings.HasPrefix(ev.Name, "ProfilerStep#") && !ev.IsGPU() && ev.Cat != "gpu_user_annotation" {
			r.Steps = append(r.Steps, s)
		}
		if ev.Cat == "gpu_user_annotation" {
			return
		}
	}
	s.GPU = ev.IsGPU()
	switch {
	case s.GPU:
		st := ev.Stream
		if st < 0 {
			st = ev.TID
		}
		s.Lane = r.lane(fmt.Sprintf("stream %d", st))
	case info.Format == trace.Horovod:
		s.Tensor = ev.PIDName
		s.Lane = r.lane("tensor " + ev.PIDName)
		if s.Numel > 0 && s.Bytes < 0 {
			s.Bytes = s.Numel * dtypeSize(s.DType)
		}
	case ev.PIDName != "" && info.Format == trace.BytePS:
		s.Tensor = ev.PIDName
		s.Lane = r.lane(ev.PIDName + " " + ev.TIDName)
	default:
		s.Lane = r.lane(fmt.Sprintf("thread %d", ev.TID))
	}
	r.Spans = append(r.Spans, s)
}

func dtypeSize(d string) int64 {
	switch strings.ToLower(d) {
	case "double", "float64", "long", "int64", "f64", "i64", "c10::complex<float>":
		return 8
	case "half", "float16", "bfloat16", "c10::half", "c10::bfloat16", "f16", "bf16", "short", "int16":
		return 2
	case "byte", "char", "bool", "int8", "uint8", "u8", "i8":
		return 1
	}
	return 4
}

// IsCollective reports whether a span is one collective operation (not
// its launch, its record_param_comms marker, or a BytePS partition stage).
func IsCollective(s *Span, f trace.Format) bool {
	if s.Class != classify.Comm {
		return false
	}
	if strings.HasPrefix(s.Name, "c10d::") || s.Name == "record_param_comms" {
		return false
	}
	if f == trace.BytePS {
		// "Comm.byteps.gradient_0" (tid "total") is the whole sync;
		// "Comm.byteps.gradient_0.PUSH" is one partition's stage
		return strings.Count(s.Name, ".") == 2
	}
	return true
}

// Collectives returns the indices of r's collective spans, by start.
// With device events, only device-side collectives count.
func (r *Rank) Collectives() []int {
	gpu := r.HasGPU()
	var idx []int
	for i := range r.Spans {
		s := &r.Spans[i]
		if (!gpu || s.GPU) && IsCollective(s, r.Format) {
			idx = append(idx, i)
		}
	}
	return idx
}
