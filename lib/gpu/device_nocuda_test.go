//go:build !cuda

package gpu

import (
	"errors"
	"testing"
)

func realDevice(t *testing.T) *Device { return nil }

// TestOpenWithoutCUDA: the default build says clearly that it has no CUDA.
func TestOpenWithoutCUDA(t *testing.T) {
	d, err := Open(0)
	if d != nil || !errors.Is(err, ErrNoCUDA) || Built {
		t.Fatalf("Open = %v, %v; want ErrNoCUDA", d, err)
	}
}
