// Package gpu runs trainwire's compression codecs (lib/codec) and Zen's
// sparse-synchronisation hashing (hashsync) on an NVIDIA GPU through the
// CUDA driver API (gorgonia.org/cu), with bytes on the wire identical to
// the CPU path.
//
// The CUDA path exists only in binaries built with -tags cuda (it needs
// cuda.h and libcuda at build time, and cu's package init exits the
// process when no driver is present, so CUDA builds are separate binaries
// such as bin/compressor-cuda). Without the tag, Open returns ErrNoCUDA and
// nothing else in the package touches a GPU.
//
// Kernels are CUDA C in kernels/*.cu, compiled to PTX by kernels/gen.sh
// (go generate) and embedded; the driver JIT-compiles the compute_70 PTX
// for whatever GPU it finds. Every kernel has a Go twin in the tests (an
// emulator that runs the kernel's per-block and per-thread logic on the
// CPU), and the host-side orchestration in this package is the same code
// for the emulator and the GPU, so the parity tests prove the algorithm
// here and re-run against the real device where one exists.
//
// Bit-exactness: reductions (Σx, Σ|x|, Σx², max) follow lib/codec's fixed
// order — float32 partial sums of 8 (or per-lane float64 chains) added in
// float64 in index order per 64Ki block, blocks added in order — so norms,
// means, scales and MSTopK's thresholds are the CPU's bit for bit; the PTX
// is built with -fmad=false so nothing is fused into an FMA. The encoded
// frames are therefore byte-identical to lib/codec's, with no tolerance.
// Zen's hash partition is a set per partition (its slot order depends on
// which thread wins a CAS); Partition.Sort makes it canonical.
package gpu
