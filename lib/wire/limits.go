package wire

// Limits bound what a Reader allocates on behalf of its input. Every length
// read from the wire is checked against them before anything is allocated.
type Limits struct {
	// MaxPayload is the largest bin value, in bytes.
	MaxPayload int64
	// MaxElems is the largest array or map, in elements.
	MaxElems int
	// MaxString is the longest string, in bytes.
	MaxString int
	// MaxDepth is the deepest nesting of free-form values.
	MaxDepth int
	// MaxDims is the most dimensions a shape may have.
	MaxDims int
}

// DefaultLimits are generous but finite: a bin32 payload (4 GiB − 1), 1 Mi
// elements per array or map, 1 MiB strings, depth 16, 16 dimensions.
var DefaultLimits = Limits{
	MaxPayload: 1<<32 - 1,
	MaxElems:   1 << 20,
	MaxString:  1 << 20,
	MaxDepth:   16,
	MaxDims:    16,
}

// withDefaults fills zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	if l.MaxPayload <= 0 {
		l.MaxPayload = DefaultLimits.MaxPayload
	}
	if l.MaxElems <= 0 {
		l.MaxElems = DefaultLimits.MaxElems
	}
	if l.MaxString <= 0 {
		l.MaxString = DefaultLimits.MaxString
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultLimits.MaxDepth
	}
	if l.MaxDims <= 0 {
		l.MaxDims = DefaultLimits.MaxDims
	}
	return l
}
