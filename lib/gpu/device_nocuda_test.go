//go:build !cuda

package gpu

import (
	"errors"
	"strings"
	"testing"
)

func realDevice(t *testing.T) *Device { return nil }

// TestOpenWithoutCUDA: the default build says clearly that it has no CUDA;
// a cudaemu build opens its emulated device 0 and nothing else.
func TestOpenWithoutCUDA(t *testing.T) {
	d, err := Open(0)
	if Built {
		t.Fatal("Built is true without -tags cuda")
	}
	if emulated {
		if err != nil || !strings.Contains(d.Name(), "cudaemu") {
			t.Fatalf("Open(0) in a cudaemu build = %v, %v", d, err)
		}
		d.Close()
		if d, err := Open(1); d != nil || err == nil {
			t.Fatalf("Open(1) in a cudaemu build = %v, %v", d, err)
		}
		return
	}
	if d != nil || !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("Open = %v, %v; want ErrNoCUDA", d, err)
	}
}
