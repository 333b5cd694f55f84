//go:build cuda

package gpu

import (
	"sync"
	"testing"
)

var (
	realOnce sync.Once
	real     *Device
	realErr  error
)

// realDevice opens GPU 0 (TRAINWIRE_GPU_DEVICE is not needed: the tests
// use the first device). A -tags cuda test binary only starts where a
// driver is present (cu's init), so failing to open the GPU is an error.
func realDevice(t *testing.T) *Device {
	realOnce.Do(func() { real, realErr = Open(0) })
	if realErr != nil {
		t.Fatalf("opening the GPU: %v", realErr)
	}
	return real
}
