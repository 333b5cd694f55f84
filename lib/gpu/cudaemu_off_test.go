//go:build !cudaemu

package gpu

import "testing"

func cudaEmuDevice(t *testing.T) *Device { return nil }

const emulated = false
