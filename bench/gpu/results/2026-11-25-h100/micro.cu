// Scratch micro-benchmark of 2026-11-25 (micro.txt is its output on the H100): lib/gpu's kernels
// as of d3b0651 ("orig") against candidate variants (v_*), byte for byte and timed with CUDA events.
// It ran from out/micro/ with d3b0651's kernels: `nvcc -O3 -arch=sm_90 -fmad=false -std=c++17
// micro.cu`. From here the includes below reach the current kernels, in which tw_maxkey,
// tw_sign_pack, tw_fp16, tw_bf16 and tw_sel_write already are the winning variants, so "orig" no
// longer means d3b0651 for those. v_sumsq_smem is a prototype that does NOT match bit for bit.
#include "../../../../lib/gpu/kernels/quant.cu"
#include "../../../../lib/gpu/kernels/select.cu"
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <string>
#include <functional>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e_)); exit(1);} } while (0)

__device__ __forceinline__ void warp_max_or(u32& m, u32& b) {
  for (int o = 16; o > 0; o >>= 1) { m = max(m, __shfl_down_sync(0xffffffffu, m, o)); b |= __shfl_down_sync(0xffffffffu, b, o); }
}
// ---- maxkey: grid-stride, scalar and float4
extern "C" __global__ void v_maxkey_gs(const float* __restrict__ x, u64 n, u32* maxkey, u32* bad) {
  u64 stride = (u64)gridDim.x * blockDim.x; u32 m = 0, b = 0;
  for (u64 i = gtid(); i < n; i += stride) { u32 u = __float_as_uint(x[i]); m = max(m, u & 0x7fffffffu); b |= expbad(u); }
  warp_max_or(m, b);
  if ((threadIdx.x & 31) == 0) { if (m) atomicMax(maxkey, m); if (b & 0x80000000u) atomicOr(bad, 1u); }
}
extern "C" __global__ void v_maxkey_gs4(const float* __restrict__ x, u64 n, u32* maxkey, u32* bad) {
  u64 stride = (u64)gridDim.x * blockDim.x; u32 m = 0, b = 0;
  u64 n4 = (((u64)x & 15) == 0) ? n / 4 : 0;
  const float4* x4 = (const float4*)x;
  for (u64 i = gtid(); i < n4; i += stride) {
    float4 f = x4[i]; u32 u0 = __float_as_uint(f.x), u1 = __float_as_uint(f.y), u2 = __float_as_uint(f.z), u3 = __float_as_uint(f.w);
    m = max(m, max(max(u0 & 0x7fffffffu, u1 & 0x7fffffffu), max(u2 & 0x7fffffffu, u3 & 0x7fffffffu)));
    b |= expbad(u0) | expbad(u1) | expbad(u2) | expbad(u3);
  }
  for (u64 i = 4 * n4 + gtid(); i < n; i += stride) { u32 u = __float_as_uint(x[i]); m = max(m, u & 0x7fffffffu); b |= expbad(u); }
  warp_max_or(m, b);
  if ((threadIdx.x & 31) == 0) { if (m) atomicMax(maxkey, m); if (b & 0x80000000u) atomicOr(bad, 1u); }
}
// ---- sign_pack: same geometry, float4 loads; B: block-level atomics
template <bool BLOCKRED>
__global__ void v_sign_pack(const float* __restrict__ x, u8* __restrict__ bits, u64 n, u64 invert, u32* bad, u64* npos) {
  u64 t = gtid(); u64 nbytes = (n + 7) / 8; u32 b = 0, badacc = 0, pos = 0;
  if (t < nbytes) {
    u64 i0 = 8 * t;
    if (i0 + 8 <= n && ((u64)x & 15) == 0) {
      float4 f0 = ((const float4*)x)[2 * t], f1 = ((const float4*)x)[2 * t + 1];
      u32 u[8] = {__float_as_uint(f0.x), __float_as_uint(f0.y), __float_as_uint(f0.z), __float_as_uint(f0.w),
                  __float_as_uint(f1.x), __float_as_uint(f1.y), __float_as_uint(f1.z), __float_as_uint(f1.w)};
#pragma unroll
      for (int j = 0; j < 8; j++) { badacc |= expbad(u[j]); u32 p = (u[j] >> 31) ^ 1u; pos += p; b |= (invert ? (p ^ 1u) : p) << (7 - j); }
    } else {
      for (int j = 0; j < 8; j++) { u64 i = i0 + j; if (i < n) { u32 u = __float_as_uint(x[i]); badacc |= expbad(u); u32 p = (u >> 31) ^ 1u; pos += p; b |= (invert ? (p ^ 1u) : p) << (7 - j); } }
    }
    bits[t] = (u8)b;
  }
  for (int o = 16; o > 0; o >>= 1) { pos += __shfl_down_sync(0xffffffffu, pos, o); badacc |= __shfl_down_sync(0xffffffffu, badacc, o); }
  if (BLOCKRED) {
    __shared__ u32 sp[32], sb[32];
    if ((threadIdx.x & 31) == 0) { sp[threadIdx.x / 32] = pos; sb[threadIdx.x / 32] = badacc; }
    __syncthreads();
    if (threadIdx.x == 0) { u32 P = 0, B = 0; for (u32 w = 0; w < blockDim.x / 32; w++) { P += sp[w]; B |= sb[w]; }
      if (P) atomicAdd(npos, (u64)P); if (B & 0x80000000u) atomicOr(bad, 1u); }
  } else if ((threadIdx.x & 31) == 0) { if (pos) atomicAdd(npos, (u64)pos); if (badacc & 0x80000000u) atomicOr(bad, 1u); }
}
// ---- fp16/bf16: E elements per thread
__device__ __forceinline__ u16 bf16_one(u32 u) { return ((u & 0x7fffffffu) > 0x7f800000u) ? (u16)((u >> 16) | 0x40u) : (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16); }
template <int E, bool BF>
__global__ void v_half(const float* __restrict__ x, u16* __restrict__ out, u64 n, u32* bad) {
  u64 i0 = gtid() * E; u32 b = 0;
  if (i0 + E <= n && ((u64)x & 15) == 0 && ((u64)out & 15) == 0) {
    u32 u[E];
#pragma unroll
    for (int q = 0; q < E / 4; q++) { float4 f = ((const float4*)(x + i0))[q]; u[4*q] = __float_as_uint(f.x); u[4*q+1] = __float_as_uint(f.y); u[4*q+2] = __float_as_uint(f.z); u[4*q+3] = __float_as_uint(f.w); }
    u32 h[E / 2];
#pragma unroll
    for (int j = 0; j < E; j += 2) { b |= expbad(u[j]) | expbad(u[j+1]);
      u32 lo = BF ? bf16_one(u[j]) : f32_to_f16(u[j]), hi = BF ? bf16_one(u[j+1]) : f32_to_f16(u[j+1]); h[j/2] = lo | (hi << 16); }
    if (E == 4) *(uint2*)(out + i0) = make_uint2(h[0], h[1]);
    else *(uint4*)(out + i0) = make_uint4(h[0], h[1], h[2], h[3]);
  } else {
    for (int j = 0; j < E; j++) { u64 i = i0 + j; if (i < n) { u32 u = __float_as_uint(x[i]); b |= expbad(u); out[i] = BF ? bf16_one(u) : f32_to_f16(u); } }
  }
  for (int o = 16; o > 0; o >>= 1) b |= __shfl_down_sync(0xffffffffu, b, o);
  if ((threadIdx.x & 31) == 0 && (b & 0x80000000u)) atomicOr(bad, 1u);
}
// ---- sumsq: K chunks of loads in flight per lane, same order of additions
template <int K>
__global__ void v_sumsq(const float* __restrict__ x, u64 n, double* out) {
  u64 k = blockIdx.x, lo = k * TW_RBLOCK, hi = min(lo + TW_RBLOCK, n), len = hi - lo, n2 = len / 2;
  const float* xb = x + lo; int lane = threadIdx.x; double a = 0, b = 0; u64 g0 = 0;
  for (; g0 + 32 * K <= n2; g0 += 32 * K) {
    float v0[K], v1[K];
#pragma unroll
    for (int c = 0; c < K; c++) { u64 g = g0 + 32 * c + lane; v0[c] = xb[2 * g]; v1[c] = xb[2 * g + 1]; }
#pragma unroll
    for (int c = 0; c < K; c++)
#pragma unroll
      for (int j = 0; j < 32; j++) { double w0 = (double)__shfl_sync(0xffffffffu, v0[c], j), w1 = (double)__shfl_sync(0xffffffffu, v1[c], j);
        a = __dadd_rn(a, __dmul_rn(w0, w0)); b = __dadd_rn(b, __dmul_rn(w1, w1)); }
  }
  for (; g0 < n2; g0 += 32) {
    float v0 = 0, v1 = 0; u64 g = g0 + lane; if (g < n2) { v0 = xb[2 * g]; v1 = xb[2 * g + 1]; }
    u64 cnt = min((u64)32, n2 - g0);
    for (int j = 0; j < 32; j++) { double w0 = (double)__shfl_sync(0xffffffffu, v0, j), w1 = (double)__shfl_sync(0xffffffffu, v1, j);
      if ((u64)j < cnt) { a = __dadd_rn(a, __dmul_rn(w0, w0)); b = __dadd_rn(b, __dmul_rn(w1, w1)); } }
  }
  if (lane == 0) { if (2 * n2 < len) { double w = (double)xb[len - 1]; a = __dadd_rn(a, __dmul_rn(w, w)); } out[k] = __dadd_rn(a, b); }
}
// sumsq, block of 256: all threads stage squares (exact in float64) into shared memory, thread 0 chains.
#define SQT 2048
extern "C" __global__ void v_sumsq_smem(const float* __restrict__ x, u64 n, double* out) {
  __shared__ double sq[2][SQT];
  u64 k = blockIdx.x, lo = k * TW_RBLOCK, hi = min(lo + TW_RBLOCK, n), len = hi - lo;
  const float* xb = x + lo; double a = 0, b = 0;
  u64 ntile = (len + SQT - 1) / SQT;
  auto stage = [&](u64 tIdx, int buf) { for (u64 j = threadIdx.x; j < SQT; j += blockDim.x) { u64 i = tIdx * SQT + j; double w = i < len ? (double)xb[i] : 0.0; sq[buf][j] = __dmul_rn(w, w); } };
  if (ntile) stage(0, 0);
  __syncthreads();
  for (u64 t = 0; t < ntile; t++) {
    int buf = t & 1;
    if (threadIdx.x >= 32) { if (t + 1 < ntile) stage(t + 1, buf ^ 1); }
    else if (threadIdx.x == 0) {
      u64 m = min((u64)SQT, len - t * SQT);
      if (m == SQT) {
#pragma unroll 16
        for (int j = 0; j < SQT; j += 2) { a = __dadd_rn(a, sq[buf][j]); b = __dadd_rn(b, sq[buf][j + 1]); }
      } else {
        u64 base = t * SQT;  // pairs continue; element i even -> a, odd -> b (tail handled after)
        u64 pairs_end = (len / 2) * 2;
        for (u64 j = 0; j < m; j++) { u64 i = base + j; if (i >= pairs_end) break; if (i & 1) b = __dadd_rn(b, sq[buf][j]); else a = __dadd_rn(a, sq[buf][j]); }
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) { if (len & 1) { double w = (double)xb[len - 1]; a = __dadd_rn(a, __dmul_rn(w, w)); } out[k] = __dadd_rn(a, b); }
}
// ---- sumabs_max K
template <int K>
__global__ void v_sumabs_max(const float* __restrict__ x, u64 n, double* out, u32* maxkey, u32* bad) {
  u64 k = blockIdx.x, lo = k * TW_RBLOCK, hi = min(lo + TW_RBLOCK, n), len = hi - lo, n4 = len / 4;
  const float* xb = x + lo; int lane = threadIdx.x; double a = 0, b = 0, c = 0, d = 0; u32 m = 0, badacc = 0; u64 g0 = 0;
  for (; g0 + 32 * K <= n4; g0 += 32 * K) {
    float4 v[K];
#pragma unroll
    for (int q = 0; q < K; q++) v[q] = ((const float4*)xb)[g0 + 32 * q + lane];
#pragma unroll
    for (int q = 0; q < K; q++) {
      u32 u0 = __float_as_uint(v[q].x), u1 = __float_as_uint(v[q].y), u2 = __float_as_uint(v[q].z), u3 = __float_as_uint(v[q].w);
      badacc |= expbad(u0) | expbad(u1) | expbad(u2) | expbad(u3);
      m = max(m, max(max(u0 & 0x7fffffffu, u1 & 0x7fffffffu), max(u2 & 0x7fffffffu, u3 & 0x7fffffffu)));
      float v0 = fabsf(v[q].x), v1 = fabsf(v[q].y), v2 = fabsf(v[q].z), v3 = fabsf(v[q].w);
#pragma unroll
      for (int j = 0; j < 32; j++) {
        a = __dadd_rn(a, (double)__shfl_sync(0xffffffffu, v0, j)); b = __dadd_rn(b, (double)__shfl_sync(0xffffffffu, v1, j));
        c = __dadd_rn(c, (double)__shfl_sync(0xffffffffu, v2, j)); d = __dadd_rn(d, (double)__shfl_sync(0xffffffffu, v3, j)); }
    }
  }
  for (; g0 < n4; g0 += 32) {
    float v0 = 0, v1 = 0, v2 = 0, v3 = 0; u64 g = g0 + lane;
    if (g < n4) { const float* v = xb + 4 * g; v0 = fabsf(v[0]); v1 = fabsf(v[1]); v2 = fabsf(v[2]); v3 = fabsf(v[3]);
      u32 u0 = __float_as_uint(v[0]), u1 = __float_as_uint(v[1]), u2 = __float_as_uint(v[2]), u3 = __float_as_uint(v[3]);
      badacc |= expbad(u0) | expbad(u1) | expbad(u2) | expbad(u3);
      m = max(m, max(max(u0 & 0x7fffffffu, u1 & 0x7fffffffu), max(u2 & 0x7fffffffu, u3 & 0x7fffffffu))); }
    u64 cnt = min((u64)32, n4 - g0);
    for (int j = 0; j < 32; j++) { float w0 = __shfl_sync(0xffffffffu, v0, j), w1 = __shfl_sync(0xffffffffu, v1, j), w2 = __shfl_sync(0xffffffffu, v2, j), w3 = __shfl_sync(0xffffffffu, v3, j);
      if ((u64)j < cnt) { a = __dadd_rn(a, (double)w0); b = __dadd_rn(b, (double)w1); c = __dadd_rn(c, (double)w2); d = __dadd_rn(d, (double)w3); } }
  }
  for (int o = 16; o > 0; o >>= 1) { m = max(m, __shfl_down_sync(0xffffffffu, m, o)); badacc |= __shfl_down_sync(0xffffffffu, badacc, o); }
  if (lane == 0) {
    for (u64 i = 4 * n4; i < len; i++) { u32 u = __float_as_uint(xb[i]); badacc |= expbad(u); m = max(m, u & 0x7fffffffu); a = __dadd_rn(a, fabs((double)xb[i])); }
    out[k] = __dadd_rn(__dadd_rn(a, b), __dadd_rn(c, d)); atomicMax(maxkey, m); if (badacc & 0x80000000u) atomicOr(bad, 1u);
  }
}
// ---- sign_sums K
template <int K>
__global__ void v_sign_sums(const float* __restrict__ x, u64 n, double* out) {
  u64 k = blockIdx.x, lo = k * TW_RBLOCK, hi = min(lo + TW_RBLOCK, n), len = hi - lo, ng = len / 8;
  const float* xb = x + lo; int lane = threadIdx.x; double sum = 0, sumabs = 0; u64 g0 = 0;
  for (; g0 + 32 * K <= ng; g0 += 32 * K) {
    float4 p[K], q[K];
#pragma unroll
    for (int c = 0; c < K; c++) { p[c] = ((const float4*)xb)[2 * (g0 + 32 * c + lane)]; q[c] = ((const float4*)xb)[2 * (g0 + 32 * c + lane) + 1]; }
#pragma unroll
    for (int c = 0; c < K; c++) {
      float s = __fadd_rn(__fadd_rn(__fadd_rn(p[c].x, p[c].y), __fadd_rn(p[c].z, p[c].w)), __fadd_rn(__fadd_rn(q[c].x, q[c].y), __fadd_rn(q[c].z, q[c].w)));
      float a = __fadd_rn(__fadd_rn(__fadd_rn(fabsf(p[c].x), fabsf(p[c].y)), __fadd_rn(fabsf(p[c].z), fabsf(p[c].w))),
                          __fadd_rn(__fadd_rn(fabsf(q[c].x), fabsf(q[c].y)), __fadd_rn(fabsf(q[c].z), fabsf(q[c].w))));
#pragma unroll
      for (int j = 0; j < 32; j++) { sum = __dadd_rn(sum, (double)__shfl_sync(0xffffffffu, s, j)); sumabs = __dadd_rn(sumabs, (double)__shfl_sync(0xffffffffu, a, j)); }
    }
  }
  for (; g0 < ng; g0 += 32) {
    float s = 0, a = 0; u64 g = g0 + lane;
    if (g < ng) { const float* v = xb + 8 * g;
      s = __fadd_rn(__fadd_rn(__fadd_rn(v[0], v[1]), __fadd_rn(v[2], v[3])), __fadd_rn(__fadd_rn(v[4], v[5]), __fadd_rn(v[6], v[7])));
      a = __fadd_rn(__fadd_rn(__fadd_rn(fabsf(v[0]), fabsf(v[1])), __fadd_rn(fabsf(v[2]), fabsf(v[3]))), __fadd_rn(__fadd_rn(fabsf(v[4]), fabsf(v[5])), __fadd_rn(fabsf(v[6]), fabsf(v[7])))); }
    u64 cnt = min((u64)32, ng - g0);
    for (int j = 0; j < 32; j++) { float sj = __shfl_sync(0xffffffffu, s, j), aj = __shfl_sync(0xffffffffu, a, j);
      if ((u64)j < cnt) { sum = __dadd_rn(sum, (double)sj); sumabs = __dadd_rn(sumabs, (double)aj); } }
  }
  if (lane == 0) { for (u64 i = 8 * ng; i < len; i++) { sum = __dadd_rn(sum, (double)xb[i]); sumabs = __dadd_rn(sumabs, fabs((double)xb[i])); }
    out[2 * k] = sum; out[2 * k + 1] = sumabs; }
}
// ---- sel_write: float4 loads, values kept in registers
extern "C" __global__ void v_sel_write(const float* __restrict__ x, u64 n, u64 A, u64 B, u64 lo, u64 hi,
                                       const u64* __restrict__ offs, float* vals, u32* idx) {
  __shared__ u32 sh[TW_SEL_T];
  u64 base = (u64)blockIdx.x * TW_SEL_TILE + (u64)threadIdx.x * TW_SEL_E;
  float v[TW_SEL_E]; u32 cnt = base < n ? (u32)min((u64)TW_SEL_E, n - base) : 0;
  if (cnt == TW_SEL_E && ((u64)x & 15) == 0) {
#pragma unroll
    for (int q = 0; q < TW_SEL_E / 4; q++) { float4 f = ((const float4*)(x + base))[q]; v[4*q] = f.x; v[4*q+1] = f.y; v[4*q+2] = f.z; v[4*q+3] = f.w; }
  } else {
#pragma unroll
    for (int j = 0; j < TW_SEL_E; j++) v[j] = (u32)j < cnt ? x[base + j] : 0.0f;
  }
  u32 mine_a = 0, mine_b = 0;
#pragma unroll
  for (int j = 0; j < TW_SEL_E; j++) if ((u32)j < cnt) { u32 k = magkey(v[j]); mine_a += k >= (u32)A; mine_b += (k >= (u32)B) & (k < (u32)A); }
  u64 band0 = offs[2 * blockIdx.x + 1] + scan_excl(mine_b, sh);
  u64 bl = max(band0, (u64)lo), bh = min(band0 + mine_b, (u64)hi);
  u32 mine = mine_a + (u32)(bh > bl ? bh - bl : 0);
  u64 out = offs[2 * blockIdx.x] + scan_excl(mine, sh);
  u64 r = band0;
  if (mine == 0) return;
#pragma unroll
  for (int j = 0; j < TW_SEL_E; j++) if ((u32)j < cnt) {
    u32 k = magkey(v[j]); bool sel = k >= (u32)A;
    if (!sel && k >= (u32)B) { sel = r >= lo && r < hi; r++; }
    if (sel) { if (vals) vals[out] = v[j]; if (idx) idx[out] = (u32)(base + j); out++; }
  }
}
// ---- data: Gaussian by Box-Muller of a counter hash
extern "C" __global__ void gen(float* x, u64 n, u64 seed) {
  u64 i = gtid(); if (i >= n) return;
  u64 r = mix64(seed + (i + 1) * 0x9E3779B97F4A7C15ull);
  double u1 = ((r >> 11) + 1) * (1.0 / 9007199254740993.0), u2 = (mix64(r) >> 11) * (1.0 / 9007199254740992.0);
  x[i] = (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float timeit(std::function<void()> f, int reps) {
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; i++) f();
  std::vector<float> ts;
  for (int i = 0; i < reps; i++) { cudaEventRecord(a); f(); cudaEventRecord(b); cudaEventSynchronize(b); float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms); }
  CK(cudaGetLastError());
  std::sort(ts.begin(), ts.end()); return ts[ts.size() / 2];
}
static std::vector<unsigned char> get(void* p, size_t bytes) { std::vector<unsigned char> h(bytes); CK(cudaMemcpy(h.data(), p, bytes, cudaMemcpyDeviceToHost)); return h; }
static int fails = 0;
static void same(const char* what, u64 n, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
  bool ok = a == b; if (!ok) fails++;
  printf("  parity %-22s n=%-9llu %s\n", what, (unsigned long long)n, ok ? "same bytes" : "DIFFERENT");
}
static u32 hkey(float f) { u32 u; memcpy(&u, &f, 4); return u & 0x7fffffffu; }

int main() {
  const u64 NMAX = 64ull << 20;
  float* x; u8* o1; u8* o2; u32 *f1, *f2;
  CK(cudaMalloc(&x, 4 * NMAX + 64)); CK(cudaMalloc(&o1, 4 * NMAX)); CK(cudaMalloc(&o2, 4 * NMAX)); CK(cudaMalloc(&f1, 64)); CK(cudaMalloc(&f2, 64));
  u64* offs; CK(cudaMalloc(&offs, 16 * (NMAX / TW_SEL_TILE + 2)));
  u32* counts; CK(cudaMalloc(&counts, 8 * (NMAX / TW_SEL_TILE + 2)));
  double peak = 2.0 * 2619e6 * 5120 / 8 / 1e9;  // GB/s: 5120-bit HBM3 at 2619 MHz DDR
  printf("peak HBM %.0f GB/s (from clocks)\n", peak);
  struct Cfg { u64 n; int nanAt; bool timed; };
  for (Cfg c : {Cfg{NMAX, -1, true}, Cfg{1000003, -1, false}, Cfg{1000003, 500001, false}, Cfg{65536 * 3 + 37, -1, false}, Cfg{5, -1, false}}) {
    u64 n = c.n;
    gen<<<(n + 255) / 256, 256>>>(x, n, 42 + n); CK(cudaDeviceSynchronize());
    if (c.nanAt >= 0) { float nan = __builtin_nanf(""), inf = __builtin_inff(); CK(cudaMemcpy(x + c.nanAt, &nan, 4, cudaMemcpyHostToDevice)); CK(cudaMemcpy(x + 7, &inf, 4, cudaMemcpyHostToDevice)); }
    printf("== n=%llu nan=%d\n", (unsigned long long)n, c.nanAt);
    u64 g1 = (n + 255) / 256, gs = std::min<u64>(g1, 1024), nb = (n + 7) / 8, rb = (n + TW_RBLOCK - 1) / TW_RBLOCK;
    auto run = [&](const char* name, double bytes, std::function<void(u8*, u32*)> orig, std::function<void(u8*, u32*)> var, size_t outBytes) {
      CK(cudaMemset(o1, 0, outBytes)); CK(cudaMemset(o2, 0, outBytes)); CK(cudaMemset(f1, 0, 64)); CK(cudaMemset(f2, 0, 64));
      orig(o1, f1); var(o2, f2); CK(cudaDeviceSynchronize());
      std::vector<unsigned char> a = get(o1, outBytes), b = get(o2, outBytes), fa = get(f1, 16), fb = get(f2, 16);
      a.insert(a.end(), fa.begin(), fa.end()); b.insert(b.end(), fb.begin(), fb.end());
      same(name, n, a, b);
      if (c.timed) {
        float t1 = timeit([&] { orig(o1, f1); }, 20), t2 = timeit([&] { var(o2, f2); }, 20);
        printf("  time %-24s orig %8.1f us (%4.0f%% peak)  variant %8.1f us (%4.0f%% peak)  x%.2f\n", name, t1 * 1e3, bytes / (t1 * 1e-3) / 1e9 / peak * 100, t2 * 1e3, bytes / (t2 * 1e-3) / 1e9 / peak * 100, t1 / t2);
      }
    };
    double rd = 4.0 * n;
    run("maxkey gs", rd, [&](u8*, u32* f) { tw_maxkey<<<g1, 256>>>(x, n, f + 1, f); }, [&](u8*, u32* f) { v_maxkey_gs<<<gs, 256>>>(x, n, f + 1, f); }, 8);
    run("maxkey gs4", rd, [&](u8*, u32* f) { tw_maxkey<<<g1, 256>>>(x, n, f + 1, f); }, [&](u8*, u32* f) { v_maxkey_gs4<<<gs, 256>>>(x, n, f + 1, f); }, 8);
    for (u64 inv = 0; inv < 2; inv++) {
      run(inv ? "sign_pack f4 warp inv" : "sign_pack f4 warp", rd + nb, [&](u8* o, u32* f) { tw_sign_pack<<<(nb + 255) / 256, 256>>>(x, o, n, inv, f, (u64*)(f + 2)); }, [&](u8* o, u32* f) { v_sign_pack<false><<<(nb + 255) / 256, 256>>>(x, o, n, inv, f, (u64*)(f + 2)); }, nb);
      run(inv ? "sign_pack f4 block inv" : "sign_pack f4 block", rd + nb, [&](u8* o, u32* f) { tw_sign_pack<<<(nb + 255) / 256, 256>>>(x, o, n, inv, f, (u64*)(f + 2)); }, [&](u8* o, u32* f) { v_sign_pack<true><<<(nb + 255) / 256, 256>>>(x, o, n, inv, f, (u64*)(f + 2)); }, nb);
    }
    run("fp16 x4", rd + 2.0 * n, [&](u8* o, u32* f) { tw_fp16<<<g1, 256>>>(x, (u16*)o, n, f); }, [&](u8* o, u32* f) { v_half<4, false><<<((n + 3) / 4 + 255) / 256, 256>>>(x, (u16*)o, n, f); }, 2 * n);
    run("fp16 x8", rd + 2.0 * n, [&](u8* o, u32* f) { tw_fp16<<<g1, 256>>>(x, (u16*)o, n, f); }, [&](u8* o, u32* f) { v_half<8, false><<<((n + 7) / 8 + 255) / 256, 256>>>(x, (u16*)o, n, f); }, 2 * n);
    run("bf16 x4", rd + 2.0 * n, [&](u8* o, u32* f) { tw_bf16<<<g1, 256>>>(x, (u16*)o, n, f); }, [&](u8* o, u32* f) { v_half<4, true><<<((n + 3) / 4 + 255) / 256, 256>>>(x, (u16*)o, n, f); }, 2 * n);
    run("bf16 x8", rd + 2.0 * n, [&](u8* o, u32* f) { tw_bf16<<<g1, 256>>>(x, (u16*)o, n, f); }, [&](u8* o, u32* f) { v_half<8, true><<<((n + 7) / 8 + 255) / 256, 256>>>(x, (u16*)o, n, f); }, 2 * n);
    run("sumsq K4", rd, [&](u8* o, u32*) { tw_sumsq<<<rb, 32>>>(x, n, (double*)o); }, [&](u8* o, u32*) { v_sumsq<4><<<rb, 32>>>(x, n, (double*)o); }, 8 * rb);
    run("sumsq K8", rd, [&](u8* o, u32*) { tw_sumsq<<<rb, 32>>>(x, n, (double*)o); }, [&](u8* o, u32*) { v_sumsq<8><<<rb, 32>>>(x, n, (double*)o); }, 8 * rb);
    run("sumsq K16", rd, [&](u8* o, u32*) { tw_sumsq<<<rb, 32>>>(x, n, (double*)o); }, [&](u8* o, u32*) { v_sumsq<16><<<rb, 32>>>(x, n, (double*)o); }, 8 * rb);
    run("sumsq smem", rd, [&](u8* o, u32*) { tw_sumsq<<<rb, 32>>>(x, n, (double*)o); }, [&](u8* o, u32*) { v_sumsq_smem<<<rb, 256>>>(x, n, (double*)o); }, 8 * rb);
    run("sumabs_max K4", rd, [&](u8* o, u32* f) { tw_sumabs_max<<<rb, 32>>>(x, n, (double*)o, f + 1, f); }, [&](u8* o, u32* f) { v_sumabs_max<4><<<rb, 32>>>(x, n, (double*)o, f + 1, f); }, 8 * rb);
    run("sumabs_max K8", rd, [&](u8* o, u32* f) { tw_sumabs_max<<<rb, 32>>>(x, n, (double*)o, f + 1, f); }, [&](u8* o, u32* f) { v_sumabs_max<8><<<rb, 32>>>(x, n, (double*)o, f + 1, f); }, 8 * rb);
    run("sign_sums K4", rd, [&](u8* o, u32*) { tw_sign_sums<<<rb, 32>>>(x, n, (double*)o); }, [&](u8* o, u32*) { v_sign_sums<4><<<rb, 32>>>(x, n, (double*)o); }, 16 * rb);
    run("sign_sums K8", rd, [&](u8* o, u32*) { tw_sign_sums<<<rb, 32>>>(x, n, (double*)o); }, [&](u8* o, u32*) { v_sign_sums<8><<<rb, 32>>>(x, n, (double*)o); }, 16 * rb);
    // sel_write: A = key(2.5), B = key(2.3), band window [lo, hi) = [100, band/2)
    if (c.nanAt < 0 && n > 1000) {
      u64 tiles = (n + TW_SEL_TILE - 1) / TW_SEL_TILE; u32 A = hkey(2.5f), B = hkey(2.3f);
      tw_sel_count<<<tiles, TW_SEL_T>>>(x, n, A, B, counts); CK(cudaDeviceSynchronize());
      std::vector<u32> cn(2 * tiles); CK(cudaMemcpy(cn.data(), counts, 8 * tiles, cudaMemcpyDeviceToHost));
      u64 bandTot = 0; for (u64 t = 0; t < tiles; t++) bandTot += cn[2 * t + 1];
      u64 lo = 100, hi = bandTot / 2; std::vector<u64> of(2 * tiles); u64 out = 0, band = 0;
      for (u64 t = 0; t < tiles; t++) { of[2 * t] = out; of[2 * t + 1] = band; u64 a = cn[2 * t], b = cn[2 * t + 1]; u64 bl = std::max(band, lo), bh = std::min(band + b, hi); out += a; if (bh > bl) out += bh - bl; band += b; }
      CK(cudaMemcpy(offs, of.data(), 16 * tiles, cudaMemcpyHostToDevice));
      printf("  sel_write: %llu selected\n", (unsigned long long)out);
      run("sel_write f4", rd, [&](u8* o, u32*) { tw_sel_write<<<tiles, TW_SEL_T>>>(x, n, A, B, lo, hi, offs, (float*)o, (u32*)(o + 4 * out)); },
          [&](u8* o, u32*) { v_sel_write<<<tiles, TW_SEL_T>>>(x, n, A, B, lo, hi, offs, (float*)o, (u32*)(o + 4 * out)); }, 8 * out);
    }
    if (c.timed) {
      float t = timeit([&] { CK(cudaMemcpyAsync(o1, x, 4 * n, cudaMemcpyDeviceToDevice)); }, 20);
      printf("  memcpy d2d %.1f us = %.0f GB/s (%.0f%% peak)\n", t * 1e3, 8.0 * n / (t * 1e-3) / 1e9, 8.0 * n / (t * 1e-3) / 1e9 / peak * 100);
    }
  }
  printf("parity failures: %d\n", fails);
  return fails != 0;
}
