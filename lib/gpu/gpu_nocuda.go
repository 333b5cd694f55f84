//go:build !cuda && !cudaemu

package gpu

// Built reports whether this binary was built with CUDA support
// (-tags cuda).
const Built = false

// Open returns ErrNoCUDA: this binary was built without -tags cuda.
func Open(ordinal int) (*Device, error) { return nil, ErrNoCUDA }
