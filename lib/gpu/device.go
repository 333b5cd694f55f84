package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseDevice reads a tool's --device value: "cpu" (or empty), "gpu" (GPU
// 0) or "gpu:N".
func ParseDevice(s string) (isGPU bool, ordinal int, err error) {
	switch {
	case s == "" || s == "cpu":
		return false, 0, nil
	case s == "gpu":
		return true, 0, nil
	case strings.HasPrefix(s, "gpu:"):
		n, err := strconv.Atoi(s[4:])
		if err == nil && n >= 0 {
			return true, n, nil
		}
	}
	return false, 0, fmt.Errorf("--device %q: want cpu, gpu or gpu:N", s)
}
