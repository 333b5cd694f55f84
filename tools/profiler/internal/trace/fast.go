package trace

import (
	"trainwire.dev/tools/profiler/internal/jsontok"
)

// The fast path reads a whole event object straight out of the scanner's
// buffer (jsontok's Window/EndObject), with the same field logic as
// fields, args and inputDims. When it meets anything it does not handle —
// an escape in a string, the end of the buffered bytes, malformed JSON —
// it gives up having consumed nothing, and the event is read again token
// by token, which gives the same result or the error with its offset.
// FuzzFastPath checks that both paths agree.

// fastFields is fields on the fast path; ok is false when it gave up
// (ev is then partly written: the caller resets it).
func (r *parser) fastFields(ev *Event) (hasTS, hasDur, ok bool) {
	b := r.s.Window()
	dl := r.s.DepthLeft()
	i := jsontok.WS(b, 0)
	if i < len(b) && b[i] == '}' {
		r.s.EndObject(i + 1)
		return false, false, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return false, false, false
		}
		key, j, ok := jsontok.PlainString(b, i)
		if !ok {
			return false, false, false
		}
		i = jsontok.WS(b, j)
		if i >= len(b) || b[i] != ':' {
			return false, false, false
		}
		i = jsontok.WS(b, i+1)
		if i >= len(b) {
			return false, false, false
		}
		field := fieldOf(key)
		switch c := b[i]; {
		case c == '"':
			s, j, ok := jsontok.PlainString(b, i)
			if !ok {
				return false, false, false
			}
			i = j
			switch field {
			case 1:
				ev.Name = r.str(s)
			case 2:
				ev.Cat = r.str(s)
			case 3:
				if len(s) > 0 {
					ev.Ph = s[0]
				}
			case 4:
				ev.TS, hasTS = jsontok.ParseScaled(s, 3)
			case 5:
				ev.Dur, hasDur = jsontok.ParseScaled(s, 3)
			case 6:
				ev.PIDName = r.str(s)
				if v, ok := jsontok.ParseInt(s); ok {
					ev.PID = v
				}
			case 7:
				ev.TIDName = r.str(s)
				if v, ok := jsontok.ParseInt(s); ok {
					ev.TID = v
				}
			case 8:
				ev.FlowID = parseID(s)
			}
		case (c == '-' || c-'0' <= 9) && (field < 4 || field > 8):
			j, ok := jsontok.SkipNum(b, i)
			if !ok {
				return false, false, false
			}
			i = j
		case c == '-' || c-'0' <= 9:
			scale := 0
			if field <= 5 {
				scale = 3
			}
			v, vok, j, ok := jsontok.ScanScaled(b, i, scale)
			if !ok {
				return false, false, false
			}
			i = j
			switch field {
			case 4:
				ev.TS, hasTS = v, vok
			case 5:
				ev.Dur, hasDur = v, vok
			case 6:
				ev.PID = v
			case 7:
				ev.TID = v
			case 8:
				ev.FlowID = v
			}
		case c == '{' && field == 9:
			j, ok := r.fastArgs(ev, b, i+1, dl-1)
			if !ok {
				return false, false, false
			}
			i = j
		default:
			j, ok := jsontok.SkipValue(b, i, dl)
			if !ok {
				return false, false, false
			}
			i = j
		}
		i = jsontok.WS(b, i)
		if i >= len(b) {
			return false, false, false
		}
		if b[i] == ',' {
			i = jsontok.WS(b, i+1)
			continue
		}
		if b[i] == '}' {
			r.s.EndObject(i + 1)
			return hasTS, hasDur, true
		}
		return false, false, false
	}
}

// fieldOf is the key dispatch of fields.
func fieldOf(key []byte) int {
	switch string(key) {
	case "name":
		return 1
	case "cat":
		return 2
	case "ph":
		return 3
	case "ts":
		return 4
	case "dur":
		return 5
	case "pid":
		return 6
	case "tid":
		return 7
	case "id":
		return 8
	case "args":
		return 9
	}
	return 0
}

// fastArgs is args on the fast path: b[i:] follows the args object's
// '{'; it returns the index after its '}'. dl is the nesting still
// allowed inside it.
func (r *parser) fastArgs(ev *Event, b []byte, i int, dl int) (int, bool) {
	if dl < 0 {
		return 0, false
	}
	i = jsontok.WS(b, i)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return 0, false
		}
		kb, j, ok := jsontok.PlainString(b, i)
		if !ok {
			return 0, false
		}
		i = jsontok.WS(b, j)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		i = jsontok.WS(b, i+1)
		if i >= len(b) {
			return 0, false
		}
		field := argField(kb)
		var key string
		if r.keepArgs {
			key = r.str(kb)
		}
		switch c := b[i]; {
		case c == '[' && field == aInputDims:
			n, j, ok := r.fastInputDims(b, i+1, dl-1)
			if !ok {
				return 0, false
			}
			ev.InNumel, i = n, j
		case (c == '-' || c-'0' <= 9) && field == aNone && !r.keepArgs:
			j, ok := jsontok.SkipNum(b, i)
			if !ok {
				return 0, false
			}
			i = j
		case c == '-' || c-'0' <= 9:
			scale := 0
			if field == aStartEpoch {
				scale = 3
			}
			v, vok, j, ok := jsontok.ScanScaled(b, i, scale)
			if !ok {
				return 0, false
			}
			numText := b[i:j]
			i = j
			if field != aNone {
				setIntArg(ev, field, v)
				if field == aStartEpoch && vok {
					ev.epochNS = v
				}
			}
			if r.keepArgs {
				f, _ := jsontok.ParseFloat(numText)
				ev.Args = append(ev.Args, Arg{Key: key, Num: f, IsNum: true})
			}
		case c == '"':
			s, j, ok := jsontok.PlainString(b, i)
			if !ok {
				return 0, false
			}
			i = j
			r.setStrArg(ev, field, s)
			if r.keepArgs {
				ev.Args = append(ev.Args, Arg{Key: key, Str: r.str(s)})
			}
		case c == 't' || c == 'f':
			j, ok := jsontok.SkipValue(b, i, dl)
			if !ok {
				return 0, false
			}
			i = j
			if r.keepArgs {
				v := 0.0
				if c == 't' {
					v = 1
				}
				ev.Args = append(ev.Args, Arg{Key: key, Num: v, IsNum: true})
			}
		default:
			j, ok := jsontok.SkipValue(b, i, dl)
			if !ok {
				return 0, false
			}
			i = j
		}
		i = jsontok.WS(b, i)
		if i >= len(b) {
			return 0, false
		}
		if b[i] == ',' {
			i = jsontok.WS(b, i+1)
			continue
		}
		if b[i] == '}' {
			return i + 1, true
		}
		return 0, false
	}
}

// fastInputDims is inputDims on the fast path: b[i:] follows the outer
// '['; it returns the element count and the index after the ']'.
func (r *parser) fastInputDims(b []byte, i int, dl int) (int64, int, bool) {
	if dl < 0 {
		return 0, 0, false
	}
	numel, first := int64(-1), true
	i = jsontok.WS(b, i)
	if i < len(b) && b[i] == ']' {
		return numel, i + 1, true
	}
	for {
		if i >= len(b) {
			return 0, 0, false
		}
		if b[i] == '[' && first {
			first = false
			if dl < 1 {
				return 0, 0, false
			}
			n := int64(1)
			dims := 0
			i = jsontok.WS(b, i+1)
			if i < len(b) && b[i] == ']' {
				i++
			} else {
				for {
					if i >= len(b) {
						return 0, 0, false
					}
					if c := b[i]; c == '-' || c-'0' <= 9 {
						d, _, j, ok := jsontok.ScanScaled(b, i, 0)
						if !ok {
							return 0, 0, false
						}
						i = j
						if n >= 0 && d >= 0 && (d == 0 || n <= (1<<62)/d) {
							n *= d
						} else {
							n = -1
						}
						dims++
					} else {
						j, ok := jsontok.SkipValue(b, i, dl-1)
						if !ok {
							return 0, 0, false
						}
						i = j
						n = -1
					}
					i = jsontok.WS(b, i)
					if i >= len(b) {
						return 0, 0, false
					}
					if b[i] == ',' {
						i = jsontok.WS(b, i+1)
						continue
					}
					if b[i] == ']' {
						i++
						break
					}
					return 0, 0, false
				}
			}
			if dims > 0 {
				numel = n
			}
		} else {
			first = false
			j, ok := jsontok.SkipValue(b, i, dl)
			if !ok {
				return 0, 0, false
			}
			i = j
		}
		i = jsontok.WS(b, i)
		if i >= len(b) {
			return 0, 0, false
		}
		if b[i] == ',' {
			i = jsontok.WS(b, i+1)
			continue
		}
		if b[i] == ']' {
			return numel, i + 1, true
		}
		return 0, 0, false
	}
}
