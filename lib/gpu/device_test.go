package gpu

import (
	"strings"
	"testing"
)

func TestParseDevice(t *testing.T) {
	for s, want := range map[string]struct {
		gpu bool
		n   int
	}{"": {false, 0}, "cpu": {false, 0}, "gpu": {true, 0}, "gpu:0": {true, 0}, "gpu:3": {true, 3}} {
		g, n, err := ParseDevice(s)
		if err != nil || g != want.gpu || n != want.n {
			t.Errorf("ParseDevice(%q) = %v, %d, %v", s, g, n, err)
		}
	}
	for _, s := range []string{"GPU", "gpu:", "gpu:-1", "gpu:x", "cuda", "gpu0"} {
		if _, _, err := ParseDevice(s); err == nil || !strings.Contains(err.Error(), "--device") {
			t.Errorf("ParseDevice(%q) = %v, want an error naming --device", s, err)
		}
	}
}
