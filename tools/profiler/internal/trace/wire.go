package trace

import (
	"trainwire.dev/lib/wire"
)

// Args that `profiler ingest` adds to an event frame beside the trace's
// own: the fields it derived that no scalar arg of the trace carries.
const (
	ArgClass   = "class"    // the class the ingest's classifier gave
	ArgPIDName = "pid_name" // a string pid, or the process's name
	ArgTIDName = "tid_name" // a string tid, or the thread's name
	ArgInNumel = "in_numel" // elements of the first input (Input Dims, Horovod's shape)
	ArgTick    = "rank"     // a Horovod tick's rank (its Label)
)

// FromWire fills ev from an event frame that `profiler ingest` wrote:
// the frame's fields, and the fields the trace reader pulls out of args
// pulled out of the frame's args the same way, so that the analyses read
// an ingested stream as they read its traces.
func FromWire(f *wire.Event, ev *Event) {
	ev.reset()
	ev.Name, ev.Cat, ev.PID, ev.TID, ev.Stream = f.Name, f.Cat, f.PID, f.TID, f.Stream
	ev.TS, ev.Dur, ev.Corr = f.TS, f.Dur, f.Corr
	if f.Ph != "" {
		ev.Ph = f.Ph[0]
	}
	for k, v := range f.Args {
		switch k {
		case ArgPIDName:
			ev.PIDName, _ = v.(string)
			continue
		case ArgTIDName:
			ev.TIDName, _ = v.(string)
			continue
		case ArgInNumel:
			if n, ok := wireNum(v); ok {
				ev.InNumel = int64(n)
			}
			continue
		}
		if k == ArgTick && ev.Cat == "horovod_tick" {
			ev.Label, _ = v.(string)
			continue
		}
		field := argField([]byte(k))
		if n, ok := wireNum(v); ok {
			setIntArg(ev, field, int64(n))
		} else if s, ok := v.(string); ok {
			setStrArgString(ev, field, s)
		}
	}
}

// wireNum is an arg's value as a number, if it is one.
func wireNum(v any) (float64, bool) {
	switch v := v.(type) {
	case float64:
		return v, true
	case float32:
		return float64(v), true
	case int64:
		return float64(v), true
	case uint64:
		return float64(v), true
	case int:
		return float64(v), true
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// setStrArgString is setStrArg for a string already decoded.
func setStrArgString(ev *Event, field int, s string) {
	switch field {
	case aColl:
		ev.Coll = s
	case aDType:
		ev.DType = s
	case aPG:
		ev.PG = s
	case aLabel:
		ev.Label = s
	case aShape, aSeq, aAddr:
		var p parser
		p.setStrArg(ev, field, []byte(s))
	}
}
