// Package trace reads training traces of every vintage one event at a
// time: Kineto Chrome traces (object form; absolute integer µs or relative
// float µs with baseTimeNanoseconds; 2022 and current category names; ROCm),
// PyTorch's legacy autograd-profiler arrays, Horovod timelines (terminated
// or not) and BytePS comm traces. Every event comes out normalized: int64
// nanoseconds, numeric pid/tid, the fields the analyses need pulled out of
// args.
package trace

// Format names a trace dialect.
type Format string

// Formats.
const (
	Kineto  Format = "kineto"  // object form with traceEvents (PyTorch profiler, Kineto)
	Legacy  Format = "legacy"  // JSON array from torch.autograd.profiler (pid "CPU functions")
	Horovod Format = "horovod" // Horovod timeline: array of B/E per tensor
	BytePS  Format = "byteps"  // BytePS comm.json: string pid = gradient, tid "total" or partition
	Chrome  Format = "chrome"  // any other Chrome trace-event array
)

// Event is one normalized trace event. Times are nanoseconds on the
// file's clock (see Info.BaseNS). Absent numeric fields are -1.
type Event struct {
	Name string
	Cat  string
	// Ph is the phase: 'X' complete, 'i' instant, 'M' metadata, 's'/'f'
	// flows, 'C' counter. Horovod B/E pairs come out as 'X'.
	Ph  byte
	PID int64
	TID int64
	// PIDName/TIDName keep string pids and tids ("CPU functions",
	// "Comm.byteps.gradient_0", "total").
	PIDName string
	TIDName string
	TS      int64
	Dur     int64
	Stream  int64
	Corr    int64
	ExtID   int64
	FlowID  int64
	Device  int64

	// Communication metadata (record_param_comms, NCCL kernels).
	Coll      string
	InNelems  int64
	OutNelems int64
	GroupSize int64
	DType     string
	PG        string
	Seq       int64
	// Bytes: memcpy/memset bytes, memory-event delta, Horovod/BytePS size.
	Bytes int64
	// Memory events: address and totals after the event.
	Addr           int64
	TotalAllocated int64
	TotalReserved  int64
	// InNumel is the element count of the first input (from "Input Dims";
	// Horovod's shape), -1 when unknown.
	InNumel int64
	// Label is args.name (metadata events, BytePS).
	Label string

	// Args holds the scalar args when the Reader keeps them.
	Args []Arg

	// epochNS is Horovod's start_time_since_epoch_in_micros, in ns.
	epochNS int64
}

// Arg is one scalar argument.
type Arg struct {
	Key string
	// Str is set for strings; Num for numbers and booleans (1/0).
	Str   string
	Num   float64
	IsNum bool
}

// End returns TS + Dur.
func (e *Event) End() int64 { return e.TS + e.Dur }

// blank is a reset Event (copied in one go: a composite literal would be
// built on the stack first).
var blank = Event{PID: -1, TID: -1, Stream: -1, Corr: -1, ExtID: -1, FlowID: -1, Device: -1,
	InNelems: -1, OutNelems: -1, GroupSize: -1, Seq: -1, Bytes: -1, Addr: -1,
	TotalAllocated: -1, TotalReserved: -1, InNumel: -1}

func (e *Event) reset() {
	args := e.Args[:0]
	*e = blank
	e.Args = args
}

// Clone returns a copy that does not share Args with e.
func (e *Event) Clone() Event {
	c := *e
	c.Args = append([]Arg(nil), e.Args...)
	return c
}

// IsGPU reports whether the event runs on a device stream (kernel,
// memcpy, memset, device-side sync): HTA's args.stream != -1, plus the
// device categories of every vintage.
func (e *Event) IsGPU() bool {
	if e.Ph != 'X' {
		return false
	}
	switch e.Cat {
	case "kernel", "Kernel", "gpu_memcpy", "gpu_memset", "Memcpy", "Memset", "cuda_sync":
		return true
	case "gpu_user_annotation", "user_annotation", "cpu_op", "Operator", "python_function",
		"cuda_runtime", "cuda_driver", "Runtime", "hip_runtime", "hip_driver", "mtia_runtime", "xpu_runtime",
		"glow_runtime", "privateuse1_runtime", "privateuse1_driver":
		return false
	}
	return e.Stream >= 0
}
