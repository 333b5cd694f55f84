// cudaemu.h — runs the CUDA C of kernels/*.cu on the CPU, for the cudaemu
// test build (go test -tags cudaemu ./gpu/; needs cgo and g++). It maps the
// CUDA built-ins the kernels use onto C++: each CUDA thread of a block is a
// fiber (ucontext) on one OS thread; __syncthreads and the warp shuffles
// are real barriers (a fiber waits until every thread of its block, or
// every lane of its warp, arrives), so the kernels' own code — scans,
// shuffles, shared memory, atomics — runs as written. Compiled with
// fp-contract=off (cudaemu.cpp): no FMA, every float operation rounds alone.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static

struct twDim { unsigned int x, y, z; };
// CUDA's vector types, for the kernels' 16-byte loads and 8-byte stores
// (cgo builds cudaemu.cpp with -fno-strict-aliasing: the kernels cast
// float* to float4* as CUDA code does).
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) uint2 { unsigned int x, y; };
static inline uint2 make_uint2(unsigned int x, unsigned int y) { return uint2{x, y}; }
extern twDim threadIdx, blockIdx, blockDim, gridDim;

void tw_emu_syncthreads();
unsigned long long tw_emu_shfl(unsigned long long v, int src, int down);

static inline void __syncthreads() { tw_emu_syncthreads(); }

template <class T> static inline T tw_from_bits(unsigned long long b) { T v; std::memcpy(&v, &b, sizeof(T)); return v; }
template <class T> static inline unsigned long long tw_to_bits(T v) { unsigned long long b = 0; std::memcpy(&b, &v, sizeof(T)); return b; }
template <class T> static inline T __shfl_sync(unsigned int, T v, int src) { return tw_from_bits<T>(tw_emu_shfl(tw_to_bits(v), src, 0)); }
template <class T> static inline T __shfl_down_sync(unsigned int, T v, unsigned int d) { return tw_from_bits<T>(tw_emu_shfl(tw_to_bits(v), (int)d, 1)); }

static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

static inline unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
static inline float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }
static inline float __double2float_rn(double d) { return (float)d; }
static inline unsigned int __float2uint_rz(float f) { return (unsigned int)f; }
static inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}
static inline int __popc(unsigned int x) { return __builtin_popcount(x); }

// One OS thread runs every fiber, and fibers switch only at barriers, so
// these read-modify-writes are atomic.
static inline unsigned int atomicAdd(unsigned int* p, unsigned int v) { unsigned int o = *p; *p = o + v; return o; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p = o + v; return o; }
static inline unsigned int atomicOr(unsigned int* p, unsigned int v) { unsigned int o = *p; *p = o | v; return o; }
static inline unsigned int atomicMax(unsigned int* p, unsigned int v) { unsigned int o = *p; *p = o > v ? o : v; return o; }
static inline unsigned int atomicCAS(unsigned int* p, unsigned int cmp, unsigned int v) { unsigned int o = *p; if (o == cmp) *p = v; return o; }
