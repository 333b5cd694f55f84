// Quantizer kernels: sign bits (signsgd, efsignsgd, onebit), the exact-order
// reductions the CPU codecs use (so norms, means and scales are bit-identical
// to lib/codec), TernGrad, QSGD, fp16 and bf16. Bit packing is lib/codec's:
// element i is bit 7 - i%8 of byte i/8, MSB first, padding zero.
#include "common.cuh"

// tw_sign_pack: thread t packs elements 8t..8t+7 into byte t:
// bit = 1 - signbit(x) (invert=0: signsgd/efsignsgd) or signbit(x)
// (invert=1: onebit), padding bits zero. It ORs 1 into *bad if any element
// is NaN/Inf and adds the number of non-negative elements (sign bit clear)
// to *npos. Two 16-byte loads per thread where x is aligned; one atomic per
// block (per warp, 3x slower on an H100: 262k atomics on one address at
// 64 Mi elements).
extern "C" __global__ void tw_sign_pack(const float* __restrict__ x, u8* __restrict__ bits, u64 n,
                                        u64 invert, u32* bad, u64* npos) {
  __shared__ u32 wpos[32], wbad[32];
  u64 t = gtid();
  u64 nbytes = (n + 7) / 8;
  u32 b = 0, badacc = 0, pos = 0;
  if (t < nbytes) {
    u64 i0 = 8 * t;
    u32 u[8];
    u32 m = 8;
    if (i0 + 8 <= n && ((u64)x & 15) == 0) {
      float4 f0 = ((const float4*)x)[2 * t], f1 = ((const float4*)x)[2 * t + 1];
      u[0] = __float_as_uint(f0.x); u[1] = __float_as_uint(f0.y); u[2] = __float_as_uint(f0.z); u[3] = __float_as_uint(f0.w);
      u[4] = __float_as_uint(f1.x); u[5] = __float_as_uint(f1.y); u[6] = __float_as_uint(f1.z); u[7] = __float_as_uint(f1.w);
    } else {
      m = (u32)min((u64)8, n - i0);
      for (u32 j = 0; j < 8; j++) u[j] = j < m ? __float_as_uint(x[i0 + j]) : 0u;
    }
#pragma unroll
    for (u32 j = 0; j < 8; j++) {
      if (j < m) {
        badacc |= expbad(u[j]);
        u32 p = (u[j] >> 31) ^ 1u;  // 1 - signbit
        pos += p;
        b |= (invert ? (p ^ 1u) : p) << (7 - j);
      }
    }
    bits[t] = (u8)b;
  }
  for (int o = 16; o > 0; o >>= 1) {
    pos += __shfl_down_sync(0xffffffffu, pos, o);
    badacc |= __shfl_down_sync(0xffffffffu, badacc, o);
  }
  if ((threadIdx.x & 31) == 0) {
    wpos[threadIdx.x / 32] = pos;
    wbad[threadIdx.x / 32] = badacc;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 P = 0, B = 0;
    for (u32 w = 0; w < (blockDim.x + 31) / 32; w++) {
      P += wpos[w];
      B |= wbad[w];
    }
    if (P) atomicAdd(npos, (u64)P);
    if (B & 0x80000000u) atomicOr(bad, 1u);
  }
}

// tw_sign_sums: one warp (blockDim 32) per 64Ki-element block k of x, as
// lib/codec's signSums: per group of 8, s = ((v0+v1)+(v2+v3))+((v4+v5)+(v6+v7))
// in float32 and the same for |v|, each added to a float64 sum in group
// order; the tail (< 8 elements) is added element by element in float64.
// out[2k] = Σx, out[2k+1] = Σ|x| for the block. The float64 additions are
// sequential, exactly as on the CPU: every lane computes one group's float32
// sums, and the warp then adds the 32 groups in order via shuffles.
extern "C" __global__ void tw_sign_sums(const float* __restrict__ x, u64 n, double* out) {
  u64 k = blockIdx.x;
  u64 lo = k * TW_RBLOCK;
  u64 hi = min(lo + TW_RBLOCK, n);
  u64 len = hi - lo;
  u64 ng = len / 8;
  const float* xb = x + lo;
  int lane = threadIdx.x;
  double sum = 0, sumabs = 0;
  for (u64 g0 = 0; g0 < ng; g0 += 32) {
    float s = 0, a = 0;
    u64 g = g0 + lane;
    if (g < ng) {
      const float* v = xb + 8 * g;
      s = __fadd_rn(__fadd_rn(__fadd_rn(v[0], v[1]), __fadd_rn(v[2], v[3])),
                    __fadd_rn(__fadd_rn(v[4], v[5]), __fadd_rn(v[6], v[7])));
      a = __fadd_rn(__fadd_rn(__fadd_rn(fabsf(v[0]), fabsf(v[1])), __fadd_rn(fabsf(v[2]), fabsf(v[3]))),
                    __fadd_rn(__fadd_rn(fabsf(v[4]), fabsf(v[5])), __fadd_rn(fabsf(v[6]), fabsf(v[7]))));
    }
    u64 cnt = min((u64)32, ng - g0);
    for (int j = 0; j < 32; j++) {
      float sj = __shfl_sync(0xffffffffu, s, j);
      float aj = __shfl_sync(0xffffffffu, a, j);
      if ((u64)j < cnt) {
        sum = __dadd_rn(sum, (double)sj);
        sumabs = __dadd_rn(sumabs, (double)aj);
      }
    }
  }
  if (lane == 0) {
    for (u64 i = 8 * ng; i < len; i++) {
      sum = __dadd_rn(sum, (double)xb[i]);
      sumabs = __dadd_rn(sumabs, fabs((double)xb[i]));
    }
    out[2 * k] = sum;
    out[2 * k + 1] = sumabs;
  }
}

// tw_sumabs_max: one warp per 64Ki block, as lib/codec's sumAbs (four
// float64 accumulators over i%4, the tail into the first, combined as
// (a+b)+(c+d)) -> out[k]; it also raises *maxkey to the largest magnitude
// key and ORs 1 into *bad on NaN/Inf. MSTopK's mean and max.
extern "C" __global__ void tw_sumabs_max(const float* __restrict__ x, u64 n, double* out, u32* maxkey, u32* bad) {
  u64 k = blockIdx.x;
  u64 lo = k * TW_RBLOCK;
  u64 hi = min(lo + TW_RBLOCK, n);
  u64 len = hi - lo;
  u64 n4 = len / 4;  // groups of 4
  const float* xb = x + lo;
  int lane = threadIdx.x;
  double a = 0, b = 0, c = 0, d = 0;
  u32 m = 0, badacc = 0;
  for (u64 g0 = 0; g0 < n4; g0 += 32) {
    float v0 = 0, v1 = 0, v2 = 0, v3 = 0;
    u64 g = g0 + lane;
    if (g < n4) {
      const float* v = xb + 4 * g;
      v0 = fabsf(v[0]); v1 = fabsf(v[1]); v2 = fabsf(v[2]); v3 = fabsf(v[3]);
      u32 u0 = __float_as_uint(v[0]), u1 = __float_as_uint(v[1]), u2 = __float_as_uint(v[2]), u3 = __float_as_uint(v[3]);
      badacc |= expbad(u0) | expbad(u1) | expbad(u2) | expbad(u3);
      m = max(m, max(max(u0 & 0x7fffffffu, u1 & 0x7fffffffu), max(u2 & 0x7fffffffu, u3 & 0x7fffffffu)));
    }
    u64 cnt = min((u64)32, n4 - g0);
    for (int j = 0; j < 32; j++) {
      float w0 = __shfl_sync(0xffffffffu, v0, j);
      float w1 = __shfl_sync(0xffffffffu, v1, j);
      float w2 = __shfl_sync(0xffffffffu, v2, j);
      float w3 = __shfl_sync(0xffffffffu, v3, j);
      if ((u64)j < cnt) {
        a = __dadd_rn(a, (double)w0);
        b = __dadd_rn(b, (double)w1);
        c = __dadd_rn(c, (double)w2);
        d = __dadd_rn(d, (double)w3);
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    m = max(m, __shfl_down_sync(0xffffffffu, m, o));
    badacc |= __shfl_down_sync(0xffffffffu, badacc, o);
  }
  if (lane == 0) {
    for (u64 i = 4 * n4; i < len; i++) {
      u32 u = __float_as_uint(xb[i]);
      badacc |= expbad(u);
      m = max(m, u & 0x7fffffffu);
      a = __dadd_rn(a, fabs((double)xb[i]));
    }
    out[k] = __dadd_rn(__dadd_rn(a, b), __dadd_rn(c, d));
    atomicMax(maxkey, m);
    if (badacc & 0x80000000u) atomicOr(bad, 1u);
  }
}

// tw_sumsq: one warp per 64Ki block, as lib/codec's sumSquares: two
// float64 accumulators over even and odd elements (x² exact in float64),
// the odd tail into the first, combined a+b -> out[k]. QSGD's norm.
extern "C" __global__ void tw_sumsq(const float* __restrict__ x, u64 n, double* out) {
  u64 k = blockIdx.x;
  u64 lo = k * TW_RBLOCK;
  u64 hi = min(lo + TW_RBLOCK, n);
  u64 len = hi - lo;
  u64 n2 = len / 2;
  const float* xb = x + lo;
  int lane = threadIdx.x;
  double a = 0, b = 0;
  for (u64 g0 = 0; g0 < n2; g0 += 32) {
    float v0 = 0, v1 = 0;
    u64 g = g0 + lane;
    if (g < n2) {
      v0 = xb[2 * g];
      v1 = xb[2 * g + 1];
    }
    u64 cnt = min((u64)32, n2 - g0);
    for (int j = 0; j < 32; j++) {
      double w0 = (double)__shfl_sync(0xffffffffu, v0, j);
      double w1 = (double)__shfl_sync(0xffffffffu, v1, j);
      if ((u64)j < cnt) {
        a = __dadd_rn(a, __dmul_rn(w0, w0));
        b = __dadd_rn(b, __dmul_rn(w1, w1));
      }
    }
  }
  if (lane == 0) {
    if (2 * n2 < len) {
      double w = (double)xb[len - 1];
      a = __dadd_rn(a, __dmul_rn(w, w));
    }
    out[k] = __dadd_rn(a, b);
  }
}

// tw_maxkey: raises *maxkey to max |x| as a magnitude key, ORs 1 into *bad
// on NaN/Inf. TernGrad's scale. A grid-stride loop (the host launches at
// most histGrid blocks) over 16-byte loads where x is aligned, one atomic
// per warp: with one thread per element, the 2M warps' atomics on one
// address took 1.6 ms for 64 Mi elements on an H100 (5% of its memory
// bandwidth); this reads at ~80%.
extern "C" __global__ void tw_maxkey(const float* __restrict__ x, u64 n, u32* maxkey, u32* bad) {
  u64 stride = (u64)gridDim.x * blockDim.x;
  u32 m = 0, b = 0;
  u64 n4 = ((u64)x & 15) == 0 ? n / 4 : 0;
  for (u64 i = gtid(); i < n4; i += stride) {
    float4 f = ((const float4*)x)[i];
    u32 u0 = __float_as_uint(f.x), u1 = __float_as_uint(f.y), u2 = __float_as_uint(f.z), u3 = __float_as_uint(f.w);
    m = max(m, max(max(u0 & 0x7fffffffu, u1 & 0x7fffffffu), max(u2 & 0x7fffffffu, u3 & 0x7fffffffu)));
    b |= expbad(u0) | expbad(u1) | expbad(u2) | expbad(u3);
  }
  for (u64 i = 4 * n4 + gtid(); i < n; i += stride) {
    u32 u = __float_as_uint(x[i]);
    m = max(m, u & 0x7fffffffu);
    b |= expbad(u);
  }
  for (int o = 16; o > 0; o >>= 1) {
    m = max(m, __shfl_down_sync(0xffffffffu, m, o));
    b |= __shfl_down_sync(0xffffffffu, b, o);
  }
  if ((threadIdx.x & 31) == 0) {
    if (m) atomicMax(maxkey, m);
    if (b & 0x80000000u) atomicOr(bad, 1u);
  }
}

// tw_terngrad: thread t writes byte t of both bit planes (nb bytes each) for
// elements 8t..8t+7: with p = float32(|x| * inv) (inv = 1/s in float64) and
// u the 24-bit uniform of draw(key, i), the element is sent when u < p, in
// plane 1 if x > 0, else plane 2.
extern "C" __global__ void tw_terngrad(const float* __restrict__ x, u8* bits, u64 n, u64 nb, u64 key, double inv) {
  u64 t = gtid();
  if (t >= nb) return;
  u32 p1 = 0, p2 = 0;
  for (int j = 0; j < 8; j++) {
    u64 i = 8 * t + j;
    if (i >= n) break;
    float v = x[i];
    float p = __double2float_rn(__dmul_rn(fabs((double)v), inv));
    if (unit24(draw(key, i)) < p) {
      if (v > 0.0f) p1 |= 0x80u >> j;
      else p2 |= 0x80u >> j;
    }
  }
  bits[t] = (u8)p1;
  bits[nb + t] = (u8)p2;
}

// tw_qsgd: thread t codes the pair 2t, 2t+1. Per 64Ki block b the CPU runs
// a wyrand seeded with draw(key, b), one 64-bit output per pair: state
// after j+1 steps is seed + (j+1)·0xa0761d6478bd642f, so pair j of the block
// computes its output directly. Even elements take bits 40..63, odd ones
// bits 16..39. code = sign·(⌊q⌋ + [u < frac q]) with q = min(uint32(|x|·sc24),
// maxT) in 8.24 fixed point.
__device__ __forceinline__ u8 qsgd_one(float v, float sc24, u32 maxT, u32 u) {
  u32 b = __float_as_uint(v);
  u32 t = min(__float2uint_rz(__fmul_rn(__uint_as_float(b & 0x7fffffffu), sc24)), maxT);
  int l = (int)(t >> 24) + (int)((u - (t & 0xffffffu)) >> 31);
  int s = ((int)b) >> 31;
  return (u8)((l ^ s) - s);
}
extern "C" __global__ void tw_qsgd(const float* __restrict__ x, u8* codes, u64 n, u64 sc24bits, u64 maxT, u64 key) {
  u64 t = gtid();
  u64 i = 2 * t;
  if (i >= n) return;
  u64 blk = i / TW_RBLOCK;
  u64 j = (i - blk * TW_RBLOCK) / 2;
  u64 s = draw(key, blk) + (j + 1) * 0xa0761d6478bd642full;
  u64 r2 = s ^ 0xe7037ed1a0b428dbull;
  u64 r = __umul64hi(s, r2) ^ (s * r2);
  float sc24 = f32arg(sc24bits);
  codes[i] = qsgd_one(x[i], sc24, (u32)maxT, (u32)(r >> 40));
  if (i + 1 < n) codes[i + 1] = qsgd_one(x[i + 1], sc24, (u32)maxT, (u32)(r >> 16) & 0xffffffu);
}

// f32 -> IEEE half, round to nearest even (lib/codec F32ToF16, integer form).
__device__ __forceinline__ u16 f32_to_f16(u32 b) {
  u32 sign = (b >> 16) & 0x8000u;
  int exp = (int)((b >> 23) & 0xffu);
  u32 man = b & 0x7fffffu;
  if (exp == 0xff) {
    if (man != 0) return (u16)(sign | 0x7e00u | (man >> 13));
    return (u16)(sign | 0x7c00u);
  }
  int e = exp - 127 + 15;
  if (e >= 0x1f) return (u16)(sign | 0x7c00u);
  if (e <= 0) {
    if (e < -10) return (u16)sign;
    u32 m = man | 0x800000u;
    u32 shift = (u32)(14 - e);
    u32 h = m >> shift;
    u32 rem = m & ((1u << shift) - 1);
    u32 half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) h++;
    return (u16)(sign | h);
  }
  u32 h = ((u32)e << 10) | (man >> 13);
  u32 rem = man & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
  return (u16)(sign | h);
}

// bf16 of the bits u: round to nearest even (NaN stays a quiet NaN).
__device__ __forceinline__ u16 f32_to_bf16(u32 u) {
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x40u);
  return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// tw_half: thread t converts elements 4t..4t+3 (one 16-byte load and one
// 8-byte store where x and out are aligned): out[i] = half(x[i]) (bf = 0,
// fp16) or bfloat16(x[i]) (bf = 1); ORs 1 into *bad on NaN/Inf. (One
// element per thread read at ~50% of an H100's memory bandwidth, four at
// ~85%.)
__device__ __forceinline__ void tw_half(const float* __restrict__ x, u16* __restrict__ out, u64 n, u32* bad, bool bf) {
  u64 i0 = 4 * gtid();
  u32 b = 0;
  if (i0 + 4 <= n && ((u64)x & 15) == 0 && ((u64)out & 7) == 0) {
    float4 f = ((const float4*)x)[i0 / 4];
    u32 u0 = __float_as_uint(f.x), u1 = __float_as_uint(f.y), u2 = __float_as_uint(f.z), u3 = __float_as_uint(f.w);
    b = expbad(u0) | expbad(u1) | expbad(u2) | expbad(u3);
    u32 h0 = bf ? f32_to_bf16(u0) : f32_to_f16(u0), h1 = bf ? f32_to_bf16(u1) : f32_to_f16(u1);
    u32 h2 = bf ? f32_to_bf16(u2) : f32_to_f16(u2), h3 = bf ? f32_to_bf16(u3) : f32_to_f16(u3);
    ((uint2*)out)[i0 / 4] = make_uint2(h0 | (h1 << 16), h2 | (h3 << 16));  // little-endian: element i0 first
  } else {
    for (u64 i = i0; i < i0 + 4 && i < n; i++) {
      u32 u = __float_as_uint(x[i]);
      b |= expbad(u);
      out[i] = bf ? f32_to_bf16(u) : f32_to_f16(u);
    }
  }
  for (int o = 16; o > 0; o >>= 1) b |= __shfl_down_sync(0xffffffffu, b, o);
  if ((threadIdx.x & 31) == 0 && (b & 0x80000000u)) atomicOr(bad, 1u);
}

// tw_fp16: out[i] = half(x[i]), four elements per thread (tw_half).
extern "C" __global__ void tw_fp16(const float* __restrict__ x, u16* out, u64 n, u32* bad) { tw_half(x, out, n, bad, false); }

// tw_bf16: out[i] = bfloat16(x[i]), four elements per thread (tw_half).
extern "C" __global__ void tw_bf16(const float* __restrict__ x, u16* out, u64 n, u32* bad) { tw_half(x, out, n, bad, true); }
