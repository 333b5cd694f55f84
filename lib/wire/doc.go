// Package wire is trainwire's stream contract: the frames every tool reads
// and writes on pipes and sockets, their canonical msgpack encoding, and a
// strict, bounded decoder. docs/wire.md is the specification; this package
// and clients/python/trainwire/wire.py implement it byte for byte.
//
// A stream is a Header frame, data frames, and an End frame carrying the
// frame count and the XXH3-64 digest of every bin value, so a truncated or
// corrupted stream is detected. Writer produces streams; Reader consumes
// them, bounding every length by its Limits before allocating and
// reporting every problem as a *DecodeError naming the frame index, the
// byte offset and the field.
//
// Tensor payloads are msgpack bin values holding little-endian bytes. The
// Writer copies them straight from the caller's memory into its buffered
// output; NewDenseF32 and Dense.F32 view []float32 as bytes without copying
// on little-endian hosts (see lib/tensor).
package wire
