// Shared helpers of trainwire's CUDA kernels (lib/gpu). Every kernel is
// extern "C" so that its PTX name is its C name, and every scalar
// parameter is 64 bits wide (unsigned long long, long long or double):
// gorgonia.org/cu's Launch copies each parameter as 8 bytes. A float32
// parameter travels as its bits in the low half of a u64 (f32arg).
//
// Floating-point: the PTX is generated with -fmad=false, so no a*b+c is
// contracted into an FMA; each operation rounds as the Go reference does.
#pragma once

typedef unsigned long long u64;
typedef long long i64;
typedef unsigned int u32;
typedef unsigned char u8;
typedef unsigned short u16;

#define TW_BLOCK 256           // threads of the elementwise kernels
#define TW_RBLOCK 65536        // codec's fixed reduction block (lib/codec blockLen)
#define TW_SEL_T 256           // threads of the select kernels
#define TW_SEL_E 16            // elements per select thread
#define TW_SEL_TILE (TW_SEL_T * TW_SEL_E)

__device__ __forceinline__ float f32arg(u64 bits) { return __uint_as_float((u32)bits); }

// magnitude key: float bits without the sign; monotone in |x|, -0 == +0.
__device__ __forceinline__ u32 magkey(float v) { return __float_as_uint(v) & 0x7fffffffu; }

// expbad: bit 31 set iff the exponent field is all ones (NaN or Inf).
__device__ __forceinline__ u32 expbad(u32 u) { return (u & 0x7f800000u) + 0x00800000u; }

// SplitMix64's finaliser and lib/codec's counter-based draw.
__device__ __forceinline__ u64 mix64(u64 z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
__device__ __forceinline__ u64 draw(u64 key, u64 i) { return mix64(key + (i + 1) * 0x9E3779B97F4A7C15ull); }

// unit24: the top 24 bits of r as a float in [0, 1), exactly.
__device__ __forceinline__ float unit24(u64 r) { return __fmul_rn((float)(u32)(r >> 40), 1.0f / 16777216.0f); }

// global thread index
__device__ __forceinline__ u64 gtid() { return (u64)blockIdx.x * blockDim.x + threadIdx.x; }
