// Package codec holds trainwire's gradient-compression codecs and their
// error-feedback memories: exact and approximate top-k, random-k,
// threshold and DGC sparsification; HiTopK's row selection (exact L2 or
// MSTopK on the row norms); QSGD, TernGrad, 1-bit, signSGD,
// Signum, EF-signSGD, FP16, BF16 and natural quantisation; and PowerSGD.
//
// Every codec turns a float32 tensor into a wire.Compressed frame in one
// canonical encoding (docs/compressor.md) and back. Frames are
// self-describing: Decode needs nothing but the frame, so a frame written
// by one process decodes in any other. Every payload length is a pure
// function of the tensor's shape and the codec's parameters (threshold is
// the one data-dependent exception, as its definition requires), and
// decoders check every length, dtype and index of a frame from the wire
// before they touch memory.
//
// Randomness (random-k indices, stochastic rounding, MSTopK's window,
// DGC's sample) comes from a counter-based generator keyed by the codec's
// seed, the tensor's name and the step, so every rank computes the same
// draws without exchanging them and results do not depend on the number
// of goroutines.
//
// NaN and Inf rule: encoders reject a tensor holding NaN or ±Inf with an
// *NonFiniteError (nothing is encoded and no state changes). Decoders do
// not inspect values: they reproduce what the frame holds.
//
// Hot loops have a plain reference twin (topkRef, packSignsRef, …) that
// the tests compare with the fast path bit for bit.
package codec
