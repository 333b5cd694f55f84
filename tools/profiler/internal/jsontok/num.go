package jsontok

import (
	"math"
	"strconv"
)

// ParseInt parses a JSON number that is an integer (no fraction or
// exponent) into an int64.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		v, err := strconv.ParseInt(string(b), 10, 64)
		return v, err == nil
	}
	neg := b[0] == '-'
	if neg {
		b = b[1:]
		if len(b) == 0 {
			return 0, false
		}
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	if neg {
		v = -v
	}
	return v, true
}

// ParseFloat parses any JSON number.
func ParseFloat(b []byte) (float64, bool) {
	if v, ok := ParseInt(b); ok {
		return float64(v), true
	}
	v, err := strconv.ParseFloat(string(b), 64)
	return v, err == nil
}

// ParseScaled parses a JSON number and multiplies it by 10^scale
// (0 ≤ scale ≤ 9), rounding half away from zero: µs with a fractional part
// become exact integer ns with scale 3, without passing through a float64
// that cannot hold 16 significant digits plus 3 decimals.
func ParseScaled(b []byte, scale int) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	d := b
	if neg {
		d = d[1:]
	}
	var ip int64
	i := 0
	for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
		if ip > (math.MaxInt64-9)/10 {
			return slowScaled(b, scale)
		}
		ip = ip*10 + int64(d[i]-'0')
	}
	if i == 0 {
		return 0, false
	}
	var frac int64
	digits := 0
	round := false
	if i < len(d) && d[i] == '.' {
		i++
		j := i
		for ; i < len(d) && d[i] >= '0' && d[i] <= '9'; i++ {
			if digits < scale {
				frac = frac*10 + int64(d[i]-'0')
				digits++
			} else if digits == scale && i == j+scale {
				round = d[i] >= '5'
			}
		}
		if i == j {
			return 0, false
		}
	}
	if i != len(d) {
		return slowScaled(b, scale) // exponent
	}
	for ; digits < scale; digits++ {
		frac *= 10
	}
	p := pow10[scale]
	if ip > (math.MaxInt64-p)/p {
		return 0, false
	}
	v := ip*p + frac
	if round {
		v++
	}
	if neg {
		v = -v
	}
	return v, true
}

var pow10 = [...]int64{1, 10, 100, 1000, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9}

func slowScaled(b []byte, scale int) (int64, bool) {
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return 0, false
	}
	f = math.Round(f * float64(pow10[scale]))
	if f > math.MaxInt64 || f < math.MinInt64 || math.IsNaN(f) {
		return 0, false
	}
	return int64(f), true
}
