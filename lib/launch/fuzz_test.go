package launch

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// Smaller limits than the exported functions' keep each fuzz execution
// fast; the code paths are the same.
const (
	fuzzHosts = 1 << 10
	fuzzBytes = 1 << 15
)

func FuzzExpandNodelist(f *testing.F) {
	for _, s := range []string{"node[01-04,07]", "a[1-2]b[3-4]", "gpu-[1-3],cpu1", "n[9-11]", "x", "[0]", "a,b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		hosts, err := expandNodelist(s, fuzzHosts, fuzzBytes)
		if err != nil {
			if hosts != nil {
				t.Fatalf("%q: hosts %d with error %v", s, len(hosts), err)
			}
			return
		}
		checkHosts(t, s, hosts)
		first, err := firstHost(s)
		if err != nil || first != hosts[0] {
			t.Fatalf("%q: firstHost = %q, %v; want %q", s, first, err, hosts[0])
		}
	})
}

// checkHosts checks the invariants of a successful expansion.
func checkHosts(t *testing.T, s string, hosts []string) {
	t.Helper()
	if len(hosts) == 0 || len(hosts) > fuzzHosts {
		t.Fatalf("%q: %d hosts", s, len(hosts))
	}
	total := 0
	for _, h := range hosts {
		total += len(h)
		if h == "" || strings.ContainsAny(h, "[],") {
			t.Fatalf("%q: bad host %q", s, h)
		}
	}
	if total > fuzzBytes {
		t.Fatalf("%q: %d bytes", s, total)
	}
	if !strings.ContainsAny(s, "[]") {
		want := strings.Split(s, ",")
		if strings.Join(hosts, ",") != strings.Join(want, ",") {
			t.Fatalf("%q: got %q without brackets", s, hosts)
		}
	}
	if utf8.ValidString(s) {
		for _, h := range hosts {
			if !utf8.ValidString(h) {
				t.Fatalf("%q: host %q is not UTF-8", s, h)
			}
		}
	}
}

func FuzzTasksPerNode(f *testing.F) {
	for _, s := range []string{"4(x2),8", "1", "2(x3),1", "16(x1)", "1,2,3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		counts, err := expandTasksPerNode(s, fuzzHosts)
		if err != nil {
			if counts != nil {
				t.Fatalf("%q: counts with error %v", s, err)
			}
			return
		}
		if len(counts) == 0 || len(counts) > fuzzHosts {
			t.Fatalf("%q: %d counts", s, len(counts))
		}
		for _, c := range counts {
			if c < 1 {
				t.Fatalf("%q: count %d", s, c)
			}
		}
		if !strings.Contains(s, "(") && len(counts) != strings.Count(s, ",")+1 {
			t.Fatalf("%q: %d counts", s, len(counts))
		}
	})
}
