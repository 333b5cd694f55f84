package trace

import (
	"trainwire.dev/tools/profiler/internal/jsontok"
)

// arg fields pulled out of args.
const (
	aNone = iota
	aStream
	aCorr
	aExtID
	aDevice
	aColl
	aInNelems
	aOutNelems
	aGroupSize
	aDType
	aPG
	aSeq
	aBytes
	aAddr
	aTotalAlloc
	aTotalRes
	aLabel
	aInputDims
	aShape
	aStartEpoch
)

func argField(key []byte) int {
	switch string(key) {
	case "stream":
		return aStream
	case "correlation":
		return aCorr
	case "External id", "external id":
		return aExtID
	case "device", "Device Id":
		return aDevice
	case "Collective name":
		return aColl
	case "In msg nelems":
		return aInNelems
	case "Out msg nelems":
		return aOutNelems
	case "Group size":
		return aGroupSize
	case "dtype":
		return aDType
	case "Process Group Name":
		return aPG
	case "Seq", "seq":
		return aSeq
	case "bytes", "Bytes":
		return aBytes
	case "Addr":
		return aAddr
	case "Total Allocated":
		return aTotalAlloc
	case "Total Reserved":
		return aTotalRes
	case "name":
		return aLabel
	case "Input Dims", "Input dims":
		return aInputDims
	case "shape":
		return aShape
	case "start_time_since_epoch_in_micros":
		return aStartEpoch
	}
	return aNone
}

// args reads an args object (its '{' consumed) into ev.
func (r *parser) args(ev *Event) error {
	for {
		k, err := r.s.Next()
		if err != nil {
			return err
		}
		if k == jsontok.ObjEnd {
			return nil
		}
		field := argField(r.s.Bytes())
		var key string
		if r.keepArgs {
			key = r.str(r.s.Bytes())
		}
		k, err = r.s.Next()
		if err != nil {
			return err
		}
		b := r.s.Bytes()
		if field == aInputDims && k == jsontok.ArrStart {
			if ev.InNumel, err = r.inputDims(); err != nil {
				return err
			}
			continue
		}
		switch k {
		case jsontok.Number:
			var v int64
			if field != aNone {
				v, _ = r.s.Scaled(0)
			}
			setIntArg(ev, field, v)
			if field == aStartEpoch {
				if ns, ok := r.s.Scaled(3); ok {
					ev.epochNS = ns
				}
			}
			if r.keepArgs {
				f, _ := jsontok.ParseFloat(b)
				ev.Args = append(ev.Args, Arg{Key: key, Num: f, IsNum: true})
			}
		case jsontok.String:
			r.setStrArg(ev, field, b)
			if r.keepArgs {
				ev.Args = append(ev.Args, Arg{Key: key, Str: r.str(b)})
			}
		case jsontok.True, jsontok.False:
			if r.keepArgs {
				v := 0.0
				if k == jsontok.True {
					v = 1
				}
				ev.Args = append(ev.Args, Arg{Key: key, Num: v, IsNum: true})
			}
		default:
			if err := r.s.Skip(k); err != nil {
				return err
			}
		}
	}
}

// inputDims reads "Input Dims" ([[d0, d1], [], ...], '[' consumed) and
// returns the element count of the first input (-1 when it has none).
func (r *parser) inputDims() (int64, error) {
	numel, first := int64(-1), true
	for {
		k, err := r.s.Next()
		if err != nil {
			return -1, err
		}
		switch k {
		case jsontok.ArrEnd:
			return numel, nil
		case jsontok.ArrStart:
			if !first {
				if err := r.s.Skip(k); err != nil {
					return -1, err
				}
				continue
			}
			first = false
			n := int64(1)
			dims := 0
			for {
				k, err := r.s.Next()
				if err != nil {
					return -1, err
				}
				if k == jsontok.ArrEnd {
					break
				}
				if k != jsontok.Number {
					if err := r.s.Skip(k); err != nil {
						return -1, err
					}
					n = -1
					continue
				}
				d, _ := r.s.Scaled(0)
				if n >= 0 && d >= 0 && (d == 0 || n <= (1<<62)/d) {
					n *= d
				} else {
					n = -1
				}
				dims++
			}
			if dims > 0 {
				numel = n
			}
		default:
			first = false
			if err := r.s.Skip(k); err != nil {
				return -1, err
			}
		}
	}
}

// shapeNumel parses a Horovod shape string such as "[64, 3, 7, 7]".
func shapeNumel(b []byte) int64 {
	n, dims, cur, in := int64(1), 0, int64(0), false
	for _, c := range b {
		if c >= '0' && c <= '9' {
			cur = cur*10 + int64(c-'0')
			in = true
			if cur > 1<<40 {
				return -1
			}
			continue
		}
		if in {
			n *= cur
			dims++
			cur, in = 0, false
			if n > 1<<50 {
				return -1
			}
		}
	}
	if in {
		n *= cur
		dims++
	}
	if dims == 0 {
		return 1 // a scalar
	}
	return n
}

// setIntArg stores an integer arg in the event field it names (aStartEpoch
// is left to the caller: its value depends on the scale it was read at).
func setIntArg(ev *Event, field int, v int64) {
	switch field {
	case aStream:
		ev.Stream = v
	case aCorr:
		ev.Corr = v
	case aExtID:
		ev.ExtID = v
	case aDevice:
		ev.Device = v
	case aInNelems:
		ev.InNelems = v
	case aOutNelems:
		ev.OutNelems = v
	case aGroupSize:
		ev.GroupSize = v
	case aSeq:
		ev.Seq = v
	case aBytes:
		ev.Bytes = v
	case aAddr:
		ev.Addr = v
	case aTotalAlloc:
		ev.TotalAllocated = v
	case aTotalRes:
		ev.TotalReserved = v
	}
}

// setStrArg stores a string arg in the event field it names.
func (r *parser) setStrArg(ev *Event, field int, b []byte) {
	switch field {
	case aColl:
		ev.Coll = r.str(b)
	case aDType:
		ev.DType = r.str(b)
	case aPG:
		ev.PG = r.str(b)
	case aLabel:
		ev.Label = r.str(b)
	case aShape:
		ev.InNumel = shapeNumel(b)
	case aSeq:
		if v, ok := jsontok.ParseInt(b); ok {
			ev.Seq = v
		}
	case aAddr:
		ev.Addr = parseID(b)
	}
}
