package cli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/alecthomas/kong"
)

// ByteSize is a flag value in bytes that accepts unit suffixes: 4096, 64KB,
// 1MiB, 1.5G (K/M/G/T are powers of 1000 with a trailing B, of 1024 with
// iB or alone... see parseByteSize).
type ByteSize int64

// Decode implements kong.MapperValue.
func (b *ByteSize) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("size", &s); err != nil {
		return err
	}
	v, err := parseByteSize(s)
	if err != nil {
		return err
	}
	*b = ByteSize(v)
	return nil
}

// parseByteSize parses "4096", "64KB" (10^3), "64KiB" or "64K" (2^10),
// likewise M, G, T. Negative and fractional byte counts are errors.
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	u := strings.ToUpper(t)
	mult := 1.0
	units := []struct {
		suffix string
		m      float64
	}{
		{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"TIB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
		{"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"T", 1 << 40}, {"B", 1},
	}
	for _, x := range units {
		if strings.HasSuffix(u, x.suffix) {
			mult, u = x.m, strings.TrimSpace(u[:len(u)-len(x.suffix)])
			break
		}
	}
	f, err := strconv.ParseFloat(u, 64)
	if err != nil || f < 0 || f*mult > 1<<62 {
		return 0, fmt.Errorf("bad size %q (want e.g. 4096, 64KB, 1MiB, 2G)", s)
	}
	v := f * mult
	if v != float64(int64(v)) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return int64(v), nil
}

// ParseSize parses a byte count with an optional unit: "4096", "64KB"
// (10^3), "64KiB" or "64K" (2^10), and likewise M, G, T (MB = 10^6 bytes,
// MiB = M = 2^20). Fractions that give whole bytes ("1.5K") are
// accepted; negative sizes are errors.
func ParseSize(s string) (int64, error) { return parseByteSize(s) }
