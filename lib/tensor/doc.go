// Package tensor holds the float32 kernels and byte views the trainwire
// data plane is built on.
//
// The arithmetic kernels ([Add], [Scale]) call gonum's blas32, whose amd64
// implementation is SSE assembly: the gc compiler does not vectorise a
// plain loop, which is about 3.5× slower even when memory-bound (see
// go-ecosystem.md §4). Every kernel documents the plain Go loop it is
// equivalent to; the tests check the two agree bit for bit.
//
// The byte views ([Bytes], [Float32s]) give the little-endian IEEE-754 bytes
// of a []float32, which is the layout of every tensor payload on the wire
// (docs/wire.md). On little-endian hosts (and without the purego build tag)
// they are zero-copy reinterpretations of the same memory; on big-endian
// hosts, or with -tags purego, they are portable copies that encode and
// decode with encoding/binary and give identical bytes and values. [ZeroCopy]
// says which one this build has, so code that writes through a view (for
// example receiving from a socket straight into a tensor) can fall back to
// [EncodeLE] / [DecodeLE] on the portable build.
package tensor
