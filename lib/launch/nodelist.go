package launch

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Limits on Slurm hostlist and tasks-per-node expansion. They are checked
// before anything is allocated, so a hostile or mistyped list costs no more
// than a parse of its text.
const (
	// MaxNodelistHosts is the most hosts ExpandNodelist returns and the
	// most entries ExpandTasksPerNode returns.
	MaxNodelistHosts = 1 << 20
	// MaxNodelistBytes bounds the total length of the names ExpandNodelist
	// returns.
	MaxNodelistBytes = 64 << 20
	// MaxNodelistInput is the longest text ExpandNodelist and
	// ExpandTasksPerNode accept (Linux caps one environment string at
	// 128 KiB anyway).
	MaxNodelistInput = 1 << 20
	// maxBrackets bounds the bracket groups in one host expression, as in
	// a[1-2]b[3-4] (two groups). Slurm's multi-dimensional names use at
	// most five.
	maxBrackets = 16
	// maxDigits keeps every range bound well inside uint64.
	maxDigits = 18
)

// ErrTooLarge is wrapped by the errors of ExpandNodelist and
// ExpandTasksPerNode for lists that expand past MaxNodelistHosts hosts or
// MaxNodelistBytes bytes.
var ErrTooLarge = errors.New("expands past the limit")

// SyntaxError reports malformed nodelist or tasks-per-node text.
type SyntaxError struct {
	// What is "nodelist" or "tasks per node".
	What string
	// Input is the text that was parsed.
	Input string
	// Offset is the byte offset in Input where the problem was found.
	Offset int
	// Msg says what is wrong there.
	Msg string
}

// Error returns e.g. `nodelist "node[1-": byte 5: unclosed '['`; the
// exported functions wrap it as "launch: …".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%s %s: byte %d: %s", e.What, quoteShort(e.Input), e.Offset, e.Msg)
}

// quoteShort quotes s for an error message, eliding the middle of long text.
func quoteShort(s string) string {
	const keep = 40
	if len(s) <= 2*keep {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:keep]) + "…" + strconv.Quote(s[len(s)-keep:])
}

// numRange is one lo-hi range inside brackets; width is the zero-padded
// width of its lower bound as written ("01" → 2).
type numRange struct {
	lo, hi uint64
	width  int
}

func (r numRange) count() uint64 { return r.hi - r.lo + 1 }

// maxWidth is the longest number the range prints.
func (r numRange) maxWidth() int {
	return max(r.width, len(strconv.FormatUint(r.hi, 10)))
}

// part is a literal (ranges == nil) or a bracket group of one host expression.
type part struct {
	lit    string
	ranges []numRange
}

// hostExpr is one comma-separated element of a hostlist, e.g. "a[1-2]b[3]".
type hostExpr []part

// nodelistParser holds the input and the position of the next byte.
type nodelistParser struct {
	s    string
	pos  int
	open int // offset of the '[' being parsed
}

func (p *nodelistParser) fail(off int, format string, args ...any) error {
	return &SyntaxError{What: "nodelist", Input: p.s, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

// ExpandNodelist expands a Slurm hostlist such as SLURM_JOB_NODELIST into
// host names, in Slurm's order (what `scontrol show hostnames` prints):
//
//	node[01-04,07]   → node01 node02 node03 node04 node07
//	a[1-2]b[3-4]     → a1b3 a1b4 a2b3 a2b4 (the last bracket varies fastest)
//	gpu-[1-3],cpu1   → gpu-1 gpu-2 gpu-3 cpu1
//
// Commas inside brackets separate ranges, commas outside separate hosts.
// A range keeps the zero padding of its lower bound ("[08-10]" → 08 09 10).
// Duplicates and order are kept as written. Malformed text gives a
// *SyntaxError with the byte offset of the problem; a list of more than
// MaxNodelistHosts hosts or MaxNodelistBytes bytes gives an error wrapping
// ErrTooLarge, found before any host is built.
func ExpandNodelist(s string) ([]string, error) {
	hosts, err := expandNodelist(s, MaxNodelistHosts, MaxNodelistBytes)
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	return hosts, nil
}

// expandNodelist is ExpandNodelist with its limits as parameters.
func expandNodelist(s string, maxHosts, maxBytes int) ([]string, error) {
	exprs, err := parseNodelist(s)
	if err != nil {
		return nil, err
	}
	hosts, bytes := sizeNodelist(exprs, uint64(maxHosts), uint64(maxBytes))
	if hosts > uint64(maxHosts) {
		return nil, fmt.Errorf("nodelist %s: more than %d hosts: %w", quoteShort(s), maxHosts, ErrTooLarge)
	}
	if bytes > uint64(maxBytes) {
		return nil, fmt.Errorf("nodelist %s: more than %d bytes of host names: %w", quoteShort(s), maxBytes, ErrTooLarge)
	}
	out := make([]string, 0, int(hosts))
	buf := make([]byte, 0, 64)
	for _, e := range exprs {
		out = e.expand(out, buf, 0)
	}
	return out, nil
}

// firstHost returns the first host of a hostlist without expanding the rest.
func firstHost(s string) (string, error) {
	exprs, err := parseNodelist(s)
	if err != nil {
		return "", err
	}
	var b []byte
	for _, p := range exprs[0] {
		if p.ranges == nil {
			b = append(b, p.lit...)
		} else {
			b = appendPadded(b, p.ranges[0].lo, p.ranges[0].width)
		}
	}
	return string(b), nil
}

// parseNodelist splits s into host expressions.
func parseNodelist(s string) ([]hostExpr, error) {
	p := &nodelistParser{s: s}
	if len(s) > MaxNodelistInput {
		return nil, p.fail(MaxNodelistInput, "longer than %d bytes", MaxNodelistInput)
	}
	if s == "" {
		return nil, p.fail(0, "empty")
	}
	var exprs []hostExpr
	for {
		e, err := p.expr()
		if err != nil {
			return nil, err
		}
		exprs = append(exprs, e)
		if p.pos == len(s) {
			return exprs, nil
		}
		p.pos++ // the ',' that ended e
	}
}

// expr parses one host expression up to a top-level ',' or the end.
func (p *nodelistParser) expr() (hostExpr, error) {
	var e hostExpr
	start, brackets := p.pos, 0
	for p.pos < len(p.s) && p.s[p.pos] != ',' {
		c := p.s[p.pos]
		switch {
		case c == '[':
			if brackets++; brackets > maxBrackets {
				return nil, p.fail(p.pos, "more than %d bracket groups in one host", maxBrackets)
			}
			rs, err := p.bracket()
			if err != nil {
				return nil, err
			}
			e = append(e, part{ranges: rs})
		case c == ']':
			return nil, p.fail(p.pos, "']' without '['")
		case c <= ' ' || c == 0x7f:
			return nil, p.fail(p.pos, "unexpected byte %q", c)
		default:
			e = p.literal(e)
		}
	}
	if p.pos == start {
		return nil, p.fail(p.pos, "empty host name")
	}
	return e, nil
}

// literal appends the literal text at p.pos to e.
func (p *nodelistParser) literal(e hostExpr) hostExpr {
	start := p.pos
	for p.pos < len(p.s) && !strings.ContainsRune("[],", rune(p.s[p.pos])) && p.s[p.pos] > ' ' && p.s[p.pos] != 0x7f {
		p.pos++
	}
	return append(e, part{lit: p.s[start:p.pos]})
}

// bracket parses "[r1,r2,…]" starting at the '['.
func (p *nodelistParser) bracket() ([]numRange, error) {
	p.open = p.pos
	p.pos++
	var rs []numRange
	for {
		r, err := p.numRange()
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
		if p.pos == len(p.s) {
			return nil, p.fail(p.open, "unclosed '['")
		}
		switch p.s[p.pos] {
		case ']':
			p.pos++
			return rs, nil
		case ',':
			p.pos++
		default:
			return nil, p.fail(p.pos, "unexpected %q in brackets", p.s[p.pos])
		}
	}
}

// numRange parses "lo" or "lo-hi".
func (p *nodelistParser) numRange() (numRange, error) {
	loText, lo, err := p.number()
	if err != nil {
		return numRange{}, err
	}
	r := numRange{lo: lo, hi: lo, width: len(loText)}
	if p.pos < len(p.s) && p.s[p.pos] == '-' {
		p.pos++
		hiStart := p.pos
		if _, r.hi, err = p.number(); err != nil {
			return numRange{}, err
		}
		if r.hi < r.lo {
			return numRange{}, p.fail(hiStart, "range %d-%d goes down", r.lo, r.hi)
		}
	}
	return r, nil
}

// number parses a run of decimal digits.
func (p *nodelistParser) number() (string, uint64, error) {
	start := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
	}
	text := p.s[start:p.pos]
	switch {
	case text == "" && p.pos == len(p.s):
		return "", 0, p.fail(p.open, "unclosed '['")
	case text == "":
		return "", 0, p.fail(p.pos, "expected a number, found %q", p.s[p.pos])
	case len(text) > maxDigits:
		return "", 0, p.fail(start, "number longer than %d digits", maxDigits)
	}
	n, _ := strconv.ParseUint(text, 10, 64) // cannot fail: ≤ 18 digits
	return text, n, nil
}

// sizeNodelist returns the number of hosts and an upper bound on the bytes
// of their names, each saturating just past its limit.
func sizeNodelist(exprs []hostExpr, maxHosts, maxBytes uint64) (hosts, bytes uint64) {
	for _, e := range exprs {
		n, width := e.size(maxHosts)
		hosts = satAdd(hosts, n, maxHosts)
		bytes = satAdd(bytes, satMul(n, width, maxBytes), maxBytes)
	}
	return hosts, bytes
}

// size returns the number of names e expands to (saturating past limit)
// and the longest of them.
func (e hostExpr) size(limit uint64) (n, width uint64) {
	n = 1
	for _, p := range e {
		if p.ranges == nil {
			width += uint64(len(p.lit))
			continue
		}
		var c uint64
		w := 0
		for _, r := range p.ranges {
			c = satAdd(c, r.count(), limit)
			w = max(w, r.maxWidth())
		}
		n = satMul(n, c, limit)
		width += uint64(w)
	}
	return n, width
}

// satAdd returns a+b, or limit+1 if that is larger than limit.
func satAdd(a, b, limit uint64) uint64 {
	if a > limit || b > limit || a+b > limit {
		return limit + 1
	}
	return a + b
}

// satMul returns a*b, or limit+1 if that is larger than limit.
func satMul(a, b, limit uint64) uint64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > limit || b > limit || a > limit/b {
		return limit + 1
	}
	return a * b
}

// expand appends the names of e to out; parts before i are already in buf.
// The recursion is at most 2*maxBrackets+1 deep.
func (e hostExpr) expand(out []string, buf []byte, i int) []string {
	if i == len(e) {
		return append(out, string(buf))
	}
	p := e[i]
	if p.ranges == nil {
		return e.expand(out, append(buf, p.lit...), i+1)
	}
	for _, r := range p.ranges {
		for v := r.lo; ; v++ {
			out = e.expand(out, appendPadded(buf, v, r.width), i+1)
			if v == r.hi {
				break
			}
		}
	}
	return out
}

// appendPadded appends v in decimal, zero-padded to width.
func appendPadded(b []byte, v uint64, width int) []byte {
	var tmp [20]byte
	d := strconv.AppendUint(tmp[:0], v, 10)
	for i := len(d); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}

// ExpandTasksPerNode expands Slurm's SLURM_TASKS_PER_NODE (and
// SLURM_STEP_TASKS_PER_NODE, SLURM_JOB_CPUS_PER_NODE) notation into one
// count per node: "4(x2),8" → [4 4 8]. Every count must be at least 1 and
// every repeat at least 1. Malformed text gives a *SyntaxError; more than
// MaxNodelistHosts entries an error wrapping ErrTooLarge, found before
// anything is allocated.
func ExpandTasksPerNode(s string) ([]int, error) {
	counts, err := expandTasksPerNode(s, MaxNodelistHosts)
	if err != nil {
		return nil, fmt.Errorf("launch: %w", err)
	}
	return counts, nil
}

// tpnItem is one "n" or "n(xr)" item.
type tpnItem struct{ n, repeat int }

// expandTasksPerNode is ExpandTasksPerNode with its limit as a parameter.
func expandTasksPerNode(s string, limit int) ([]int, error) {
	items, err := parseTasksPerNode(s)
	if err != nil {
		return nil, err
	}
	var total uint64
	for _, it := range items {
		total = satAdd(total, uint64(it.repeat), uint64(limit))
	}
	if total > uint64(limit) {
		return nil, fmt.Errorf("tasks per node %s: more than %d nodes: %w", quoteShort(s), limit, ErrTooLarge)
	}
	out := make([]int, 0, int(total))
	for _, it := range items {
		for range it.repeat {
			out = append(out, it.n)
		}
	}
	return out, nil
}

// parseTasksPerNode parses the items of a tasks-per-node list.
func parseTasksPerNode(s string) ([]tpnItem, error) {
	fail := func(off int, format string, args ...any) error {
		return &SyntaxError{What: "tasks per node", Input: s, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	if len(s) > MaxNodelistInput {
		return nil, fail(MaxNodelistInput, "longer than %d bytes", MaxNodelistInput)
	}
	var items []tpnItem
	pos := 0
	for {
		it, next, err := parseTPNItem(s, pos, fail)
		if err != nil {
			return nil, err
		}
		items = append(items, it)
		if next == len(s) {
			return items, nil
		}
		if s[next] != ',' {
			return nil, fail(next, "unexpected %q", s[next])
		}
		pos = next + 1
	}
}

// parseTPNItem parses "n" or "n(xr)" at pos and returns the offset after it.
func parseTPNItem(s string, pos int, fail func(int, string, ...any) error) (tpnItem, int, error) {
	n, pos, err := parsePositive(s, pos, "task count", fail)
	if err != nil {
		return tpnItem{}, 0, err
	}
	it := tpnItem{n: n, repeat: 1}
	if pos == len(s) || s[pos] != '(' {
		return it, pos, nil
	}
	if !strings.HasPrefix(s[pos:], "(x") {
		return tpnItem{}, 0, fail(pos+1, "expected \"(x\"")
	}
	if it.repeat, pos, err = parsePositive(s, pos+2, "repeat count", fail); err != nil {
		return tpnItem{}, 0, err
	}
	if pos == len(s) || s[pos] != ')' {
		return tpnItem{}, 0, fail(pos, "expected ')'")
	}
	return it, pos + 1, nil
}

// parsePositive parses a decimal number ≥ 1 of at most 9 digits at pos.
func parsePositive(s string, pos int, what string, fail func(int, string, ...any) error) (int, int, error) {
	start := pos
	for pos < len(s) && s[pos] >= '0' && s[pos] <= '9' {
		pos++
	}
	switch {
	case pos == start:
		return 0, 0, fail(start, "expected a %s", what)
	case pos-start > 9:
		return 0, 0, fail(start, "%s longer than 9 digits", what)
	}
	n, _ := strconv.Atoi(s[start:pos]) // cannot fail: ≤ 9 digits
	if n < 1 {
		return 0, 0, fail(start, "%s must be at least 1", what)
	}
	return n, pos, nil
}
