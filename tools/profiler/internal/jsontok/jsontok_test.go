package jsontok

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// build decodes a whole document with the Scanner into encoding/json's
// generic values (numbers as float64).
func build(s *Scanner) (any, error) {
	k, err := s.Next()
	if err != nil {
		return nil, err
	}
	v, err := buildValue(s, k)
	if err != nil {
		return nil, err
	}
	if k, err := s.Next(); err != nil {
		return nil, err
	} else if k != EOF {
		return nil, fmt.Errorf("trailing %v", k)
	}
	return v, nil
}

func buildValue(s *Scanner, k Kind) (any, error) {
	switch k {
	case String:
		return string(s.Bytes()), nil
	case Number:
		f, ok := ParseFloat(s.Bytes())
		if !ok {
			f = math.Inf(1) // out of float64's range: encoding/json refuses it, we keep going
		}
		return f, nil
	case True:
		return true, nil
	case False:
		return false, nil
	case Null:
		return nil, nil
	case ArrStart:
		a := []any{}
		for {
			k, err := s.Next()
			if err != nil {
				return nil, err
			}
			if k == ArrEnd {
				return a, nil
			}
			v, err := buildValue(s, k)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
	case ObjStart:
		m := map[string]any{}
		for {
			k, err := s.Next()
			if err != nil {
				return nil, err
			}
			if k == ObjEnd {
				return m, nil
			}
			if k != Key {
				return nil, fmt.Errorf("expected key, got %v", k)
			}
			key := string(s.Bytes())
			k, err = s.Next()
			if err != nil {
				return nil, err
			}
			v, err := buildValue(s, k)
			if err != nil {
				return nil, err
			}
			m[key] = v
		}
	}
	return nil, fmt.Errorf("unexpected %v", k)
}

var docs = []string{
	`{"a":1,"b":[true,false,null],"c":{"d":"e\"f\\g\u00e9\ud83d\ude00"},"n":-1.5e+3}`,
	`[]`, `{}`, `[1, 2 , 3]`, ` "x" `, `0`, `-0.0e0`, `[[[[]]]]`,
	`{"traceEvents":[{"name":"k","ts":1.5,"dur":2,"args":{"x":[1,{"y":"z"}]}}],"baseTimeNanoseconds":17}`,
	`["a\nb","\/","\t\r\b\f"]`,
	`{"long":"` + strings.Repeat("abcdefgh", 100) + `","esc":"` + strings.Repeat(`x\"`, 200) + `"}`,
}

func TestMatchesEncodingJSON(t *testing.T) {
	for _, d := range docs {
		var want any
		if err := json.Unmarshal([]byte(d), &want); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
		for _, bs := range []int{1, 2, 3, 7, 64, 0} {
			got, err := build(New(iotestHalf(strings.NewReader(d)), Options{BufSize: bs}))
			if err != nil {
				t.Fatalf("bufsize %d: %s: %v", bs, d, err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("bufsize %d: %s: got %#v want %#v", bs, d, got, want)
			}
		}
	}
}

// iotestHalf returns a reader that returns at most 3 bytes per Read.
func iotestHalf(r io.Reader) io.Reader { return &smallReader{r} }

type smallReader struct{ r io.Reader }

func (s *smallReader) Read(p []byte) (int, error) {
	if len(p) > 3 {
		p = p[:3]
	}
	return s.r.Read(p)
}

func TestErrorsNameOffsets(t *testing.T) {
	cases := []struct {
		doc   string
		off   int64
		trunc bool
	}{
		{`{"a":1,}`, 7, false},
		{`{"a" 1}`, 5, false},
		{`[1 2]`, 3, false},
		{`[1,2`, 4, true},
		{`{"a":"bc`, 8, true},
		{`{"a":tru`, 5, true},
		{`{"a":trux}`, 5, false},
		{`[01]`, 1, false},
		{`[1.]`, 1, false},
		{`[1] x`, 4, false},
		{`{"a":[1,{"b":2}`, 15, true},
		{"[\"a\x01\"]", 1, false},
		{`["\q"]`, 2, false},
		{``, 0, true},
		{`   `, 3, true},
		{`[-`, 1, true},
	}
	for _, c := range cases {
		for _, bs := range []int{1, 4, 0} {
			_, err := build(New(strings.NewReader(c.doc), Options{BufSize: bs}))
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("%q (buf %d): error %v is not a SyntaxError", c.doc, bs, err)
			}
			if se.Offset != c.off {
				t.Errorf("%q (buf %d): offset %d, want %d (%v)", c.doc, bs, se.Offset, c.off, err)
			}
			if errors.Is(err, ErrTruncated) != c.trunc {
				t.Errorf("%q (buf %d): truncated=%v, want %v (%v)", c.doc, bs, !c.trunc, c.trunc, err)
			}
		}
	}
}

func TestUnterminated(t *testing.T) {
	for _, d := range []string{"[{\"a\":1},\n{\"b\":2},\n", "[{\"a\":1},\n{\"b\":2}", "[\n"} {
		s := New(strings.NewReader(d), Options{Unterminated: true, BufSize: 4})
		if _, err := build(s); err != nil {
			t.Fatalf("%q: %v", d, err)
		}
		if !s.ClosedLeniently() {
			t.Fatalf("%q: not reported as unterminated", d)
		}
		if _, err := build(New(strings.NewReader(d), Options{})); !errors.Is(err, ErrTruncated) {
			t.Fatalf("%q strict: %v", d, err)
		}
	}
	// still an error inside an element
	if _, err := build(New(strings.NewReader(`[{"a":1},{"b"`), Options{Unterminated: true})); !errors.Is(err, ErrTruncated) {
		t.Fatalf("inside an element: %v", err)
	}
}

func TestSkip(t *testing.T) {
	s := New(strings.NewReader(`{"skip":{"a":[1,2,{"b":"]}"}]},"keep":3}`), Options{BufSize: 2})
	mustKind(t, s, ObjStart)
	mustKind(t, s, Key)
	k, _ := s.Next()
	if err := s.Skip(k); err != nil {
		t.Fatal(err)
	}
	mustKind(t, s, Key)
	if string(s.Bytes()) != "keep" {
		t.Fatalf("after skip: key %q", s.Bytes())
	}
	mustKind(t, s, Number)
	mustKind(t, s, ObjEnd)
	mustKind(t, s, EOF)
}

func mustKind(t *testing.T, s *Scanner, want Kind) {
	t.Helper()
	k, err := s.Next()
	if err != nil || k != want {
		t.Fatalf("got %v %v, want %v", k, err, want)
	}
}

func TestParseScaled(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"4458676522690.655", 4458676522690655}, {"12", 12000}, {"1.5", 1500}, {"0.0004", 0},
		{"0.0005", 1}, {"-2.25", -2250}, {"1e3", 1000000}, {"1.23456", 1235}, {"1700000000000000", 1700000000000000000},
	}
	for _, c := range cases {
		got, ok := ParseScaled([]byte(c.in), 3)
		if !ok || got != c.want {
			t.Errorf("ParseScaled(%s) = %d, %v; want %d", c.in, got, ok, c.want)
		}
	}
	if _, ok := ParseScaled([]byte("99999999999999999999"), 3); ok {
		t.Error("overflow accepted")
	}
}

func FuzzScanner(f *testing.F) {
	for _, d := range docs {
		f.Add([]byte(d), uint8(3))
	}
	f.Add([]byte(`[{"a":1},`), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, bs uint8) {
		got, err := build(New(bytes.NewReader(data), Options{BufSize: int(bs%64) + 1, MaxToken: 1 << 16}))
		if !json.Valid(data) {
			if err == nil {
				t.Fatalf("invalid JSON accepted: %q", data)
			}
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error without offset: %v", err)
			}
			return
		}
		if err != nil {
			if strings.Contains(err.Error(), "longer than") || strings.Contains(err.Error(), "nesting") {
				return
			}
			if var_ := any(nil); strings.Contains(err.Error(), "bad number") && json.Unmarshal(data, &var_) != nil {
				return // out of float64 range: encoding/json refuses it too
			}
			t.Fatalf("valid JSON rejected: %q: %v", data, err)
		}
		// the fast skip accepts every valid document
		sk := New(bytes.NewReader(data), Options{BufSize: int(bs%64) + 1, MaxToken: 1 << 16})
		if k, err := sk.Next(); err == nil {
			if err := sk.Skip(k); err != nil && !strings.Contains(err.Error(), "longer than") && !strings.Contains(err.Error(), "nesting") {
				t.Fatalf("fast skip rejected valid JSON %q: %v", data, err)
			}
		}
		var want any
		if json.Unmarshal(data, &want) == nil && !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Fatalf("%q: got %#v want %#v", data, got, want)
		}
	})
}

// normalize maps invalid-UTF-8 differences away: encoding/json replaces
// bad bytes with U+FFFD, the scanner passes them through.
func normalize(v any) any {
	switch v := v.(type) {
	case string:
		return fixUTF8(v)
	case []any:
		for i := range v {
			v[i] = normalize(v[i])
		}
	case map[string]any:
		m := map[string]any{}
		for k, x := range v {
			m[fixUTF8(k)] = normalize(x)
		}
		return m
	}
	return v
}

// fixUTF8 replaces each invalid byte with U+FFFD, as encoding/json does.
func fixUTF8(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// TestFastSkip: the byte-scan skip agrees with the tokenizing one on valid
// input and names offsets on broken input.
func TestFastSkip(t *testing.T) {
	for _, d := range docs {
		for _, strict := range []bool{false, true} {
			for _, bs := range []int{1, 3, 0} {
				s := New(strings.NewReader(d), Options{BufSize: bs})
				s.Strict = strict
				k, err := s.Next()
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Skip(k); err != nil {
					t.Fatalf("%s (strict %v, buf %d): %v", d, strict, bs, err)
				}
				if k, err := s.Next(); k != EOF || err != nil {
					t.Fatalf("%s: after skip %v %v", d, k, err)
				}
			}
		}
	}
	for doc, off := range map[string]int64{`{"a":[1,2}`: 9, `{"a":"b`: 7, `[1,[2,3]`: 8, `[1,@]`: 3, `["\x"]`: 2, "[\"a\x01\"]": 3} {
		for _, bs := range []int{1, 0} {
			s := New(strings.NewReader(doc), Options{BufSize: bs})
			k, _ := s.Next()
			err := s.Skip(k)
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset != off {
				t.Errorf("%q (buf %d): %v, want offset %d", doc, bs, err, off)
			}
		}
	}
}

// TestScaled: the value kept from scanning equals ParseScaled's.
func TestScaled(t *testing.T) {
	for _, n := range []string{"0", "-0", "12", "1.5", "0.0004", "0.0005", "-2.25", "4458676522690.655", "1.23456",
		"123456789012345678", "1234567890123456789", "1e3", "-1.5E-2", "0.123456789012", "99.9995", "7.0000000001"} {
		for scale := 0; scale <= 9; scale++ {
			s := New(strings.NewReader(n), Options{})
			if k, err := s.Next(); err != nil || k != Number {
				t.Fatal(n, err)
			}
			got, ok := s.Scaled(scale)
			want, wok := ParseScaled([]byte(n), scale)
			if got != want || ok != wok {
				t.Errorf("%s scale %d: Scaled %d %v, ParseScaled %d %v", n, scale, got, ok, want, wok)
			}
		}
	}
}

// TestAppendValue: the captured bytes of every container are the input's.
func TestAppendValue(t *testing.T) {
	doc := `[{"a":"x\"y\\","b":[1,{"c":null}]}, [true], 3, {"long":"` + strings.Repeat("z", 300) + `"}]`
	want := []string{`{"a":"x\"y\\","b":[1,{"c":null}]}`, `[true]`, ``, `{"long":"` + strings.Repeat("z", 300) + `"}`}
	for _, bs := range []int{1, 2, 5, 0} {
		s := New(strings.NewReader(doc), Options{BufSize: bs})
		mustKind(t, s, ArrStart)
		for i, w := range want {
			k, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.AppendValue(k, nil)
			if err != nil || string(got) != w {
				t.Fatalf("buf %d, element %d: %q %v, want %q", bs, i, got, err, w)
			}
		}
		mustKind(t, s, ArrEnd)
		mustKind(t, s, EOF)
	}
}

func TestNewBytes(t *testing.T) {
	for _, d := range docs {
		var want any
		json.Unmarshal([]byte(d), &want)
		got, err := build(NewBytes([]byte(d), Options{}))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %v %v", d, got, err)
		}
	}
	if _, err := build(NewBytes([]byte(`{"a":[1,`), Options{})); !errors.Is(err, ErrTruncated) {
		t.Fatal(err)
	}
}
