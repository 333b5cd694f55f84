// Error feedback (lib/codec's residual memory) and the dense decoders the
// update needs: p = β·e + γ·g before encoding, e = p − x̂ after, with x̂ the
// tensor the frame decodes to. Each product and sum rounds to float32 on
// its own (no FMA: -fmad=false), as the Go reference computes it.
#include "common.cuh"

// tw_ef_compensate: p = β·e + γ·g (hase != 0) or p = γ·g (first step).
extern "C" __global__ void tw_ef_compensate(const float* __restrict__ g, const float* __restrict__ e, float* p, u64 n,
                                            u64 betabits, u64 gammabits, u64 hase) {
  u64 i = gtid();
  if (i >= n) return;
  float beta = f32arg(betabits), gamma = f32arg(gammabits);
  float gg = __fmul_rn(gamma, g[i]);
  p[i] = hase ? __fadd_rn(__fmul_rn(beta, e[i]), gg) : gg;
}

// tw_ef_update: e = p − x̂.
extern "C" __global__ void tw_ef_update(const float* __restrict__ p, const float* __restrict__ sent, float* e, u64 n) {
  u64 i = gtid();
  if (i < n) e[i] = __fsub_rn(p[i], sent[i]);
}

// tw_scatter: out[idx[j]] = vals[j] (out zeroed by the host); sparse decode.
extern "C" __global__ void tw_scatter(float* out, const u32* __restrict__ idx, const float* __restrict__ vals, u64 k) {
  u64 j = gtid();
  if (j < k) out[idx[j]] = vals[j];
}

// tw_unpack_select: out[i] = bit i set ? one : zero (MSB-first bits).
// Decodes signsgd (1, −1), efsignsgd (s, −s) and onebit (means[0], means[1]).
extern "C" __global__ void tw_unpack_select(const u8* __restrict__ bits, float* out, u64 n, u64 onebits, u64 zerobits) {
  u64 i = gtid();
  if (i < n) out[i] = (bits[i / 8] & (0x80u >> (i % 8))) ? f32arg(onebits) : f32arg(zerobits);
}

// tw_terngrad_decode: plane 1 -> s, plane 2 -> −s, else 0.
extern "C" __global__ void tw_terngrad_decode(const u8* __restrict__ bits, float* out, u64 n, u64 nb, u64 sbits) {
  u64 i = gtid();
  if (i >= n) return;
  u32 sh = 0x80u >> (i % 8);
  float s = f32arg(sbits);
  out[i] = (bits[i / 8] & sh) ? s : ((bits[nb + i / 8] & sh) ? -s : 0.0f);
}

// tw_qsgd_decode: out[i] = u · code[i] with u = norm/levels (float32).
extern "C" __global__ void tw_qsgd_decode(const signed char* __restrict__ codes, float* out, u64 n, u64 ubits) {
  u64 i = gtid();
  if (i < n) out[i] = __fmul_rn(f32arg(ubits), (float)codes[i]);
}

// half -> f32, exactly (lib/codec F16ToF32).
__device__ __forceinline__ float f16_to_f32(u32 h) {
  u32 sign = (h & 0x8000u) << 16;
  u32 exp = (h >> 10) & 0x1fu;
  u32 man = h & 0x3ffu;
  if (exp == 0x1f) return __uint_as_float(sign | 0x7f800000u | (man << 13));
  if (exp == 0) {
    if (man == 0) return __uint_as_float(sign);
    return __uint_as_float(sign | __float_as_uint(__fmul_rn((float)man, 1.0f / 16777216.0f)));
  }
  return __uint_as_float(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

// tw_half_decode: out[i] = f16 (bf=0) or bf16 (bf=1) h[i] as float32.
extern "C" __global__ void tw_half_decode(const u16* __restrict__ h, float* out, u64 n, u64 bf) {
  u64 i = gtid();
  if (i >= n) return;
  out[i] = bf ? __uint_as_float((u32)h[i] << 16) : f16_to_f32(h[i]);
}
