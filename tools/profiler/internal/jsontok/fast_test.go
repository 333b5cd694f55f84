package jsontok

import (
	"bytes"
	"testing"
)

// checkFast compares the fast-path functions on b with the Scanner
// reading the same bytes as the value of a one-member object.
func checkFast(t *testing.T, b []byte) {
	t.Helper()
	doc := append(append([]byte(`{"k":`), b...), '}')
	s := NewBytes(doc, Options{MaxDepth: 40})
	s.Next()
	s.Next()
	k, err := s.Next()
	if err == nil {
		err = s.Skip(k)
	}
	end := int(s.Pos()) - 5 // bytes of b the scanner consumed
	// the value's text, kept before the next token overwrites it
	val := append([]byte(nil), s.Bytes()...)
	buf := append(append([]byte(nil), b...), '}')
	i0 := WS(buf, 0) // the fast path calls them after whitespace
	// SkipValue: accepts only what the scanner accepts, and ends where it does
	next, ok := SkipValue(buf, i0, 40-1)
	if ok {
		if err != nil {
			t.Fatalf("SkipValue accepted %q, the scanner says %v", b, err)
		}
		if next != end {
			t.Fatalf("SkipValue(%q) ends at %d, the scanner at %d", b, next, end)
		}
	}
	// plain strings
	if k == String && err == nil {
		str, next, ok := PlainString(buf, i0)
		if ok && (!bytes.Equal(str, val) || next != end) {
			t.Fatalf("PlainString(%q) = %q, %d; scanner %q, %d", b, str, next, val, end)
		}
		if !ok && bytes.IndexByte(b[:end], '\\') < 0 {
			t.Fatalf("PlainString refused %q", b)
		}
	}
	// numbers
	var n Num
	nnext, nok := ScanNum(buf, i0, &n)
	if wantNum := k == Number && err == nil; nok != wantNum || nok && nnext != end {
		t.Fatalf("ScanNum(%q) = %d, %v; scanner %v %v at %d", b, nnext, nok, k, err, end)
	}
	if next, ok := SkipNum(buf, i0); ok != nok || ok && next != nnext {
		t.Fatalf("SkipNum(%q) = %d, %v; ScanNum %d, %v", b, next, ok, nnext, nok)
	}
	for scale := 0; scale <= 9; scale++ {
		v, vok, snext, sok := ScanScaled(buf, i0, scale)
		if sok != nok || sok && snext != nnext {
			t.Fatalf("ScanScaled(%q) ok %v next %d; ScanNum ok %v next %d", b, sok, snext, nok, nnext)
		}
		if !sok {
			continue
		}
		w, wok := n.Scaled(scale)
		if v != w || vok != wok {
			t.Fatalf("ScanScaled(%q, %d) = %d %v; Scaled %d %v", b, scale, v, vok, w, wok)
		}
		if k == Number && err == nil {
			x, xok := s2(doc, scale)
			if x != v || xok != vok {
				t.Fatalf("ScanScaled(%q, %d) = %d %v; Scanner.Scaled %d %v", b, scale, v, vok, x, xok)
			}
		}
	}
}

func s2(doc []byte, scale int) (int64, bool) {
	s := NewBytes(doc, Options{})
	s.Next()
	s.Next()
	s.Next()
	return s.Scaled(scale)
}

var fastSeeds = []string{
	`0`, `-0`, `12`, `-12.5`, `4458676522690.655`, `1.0005`, `0.0004999`, `123456789012345678`, `1234567890123456789`,
	`1e3`, `1.5E-2`, `01`, `1.`, `-`, `1.2.3`, `9223372036854775807`, `922337203685477.5807`, `12.3456789012345`,
	`"abc"`, `"a\"b"`, `"a\u00e9"`, "\"a\x01\"", `"unterminated`, `true`, `tru`, `false`, `null`, `nul`,
	`[1, 2, [3, "x]"]]`, `{"a": [1 2], "b": {"c" "d"}}`, `[1, 2}`, `["\q"]`, `["\u12"]`, `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
	`[x]`, `{"a": 1}x`, ` 1`, `-a`,
}

func TestFastMatchesScanner(t *testing.T) {
	for _, c := range fastSeeds {
		b := []byte(c)
		for n := 0; n <= len(b); n++ {
			checkFast(t, b[:n])
		}
	}
}

// FuzzFast checks the fast-path functions (PlainString, ScanNum,
// ScanScaled, SkipValue) against the Scanner.
func FuzzFast(f *testing.F) {
	for _, c := range fastSeeds {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFast(t, b) })
}
