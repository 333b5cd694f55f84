//go:build !linux || purego

package tensor

import "unsafe"

func adviseHuge(unsafe.Pointer, int) {}
