// Zen's sparse synchronisation kernels (hashsync): hierarchical hashing of
// the non-zero indices into n partitions with atomicCAS (Algorithm 1 of
// Wang et al., with the CAS fix of the spec's §7.2), the extraction of the
// hash memory by an ordered compaction, and the hash bitmap of the pull.
//
// Conventions are hashsync's (tools/hashsync/internal/zen), so the two
// agree: h_s(idx) = MurmurHash3_x86_32(idx as 4 LE bytes, seeds[s]) and
// reduce(h, n) = (h·n) >> 32 (Lemire's multiply-shift); the partition of
// idx is reduce(h_0(idx), n), identical on every rank; its slot in the
// partition's parallel memory reduce(h_s(idx), r1) for s = 1..k (CAS);
// after k failures the index takes the partition's next serial slot
// (r1..r1+r2-1, atomic counter) and past that an overflow list (lossless;
// counted). Slots hold position+1 of the index in the input list (0 =
// empty), so the output is positions, as hashsync's Parts. Bitmaps are
// LSB-first: bit t is bit t%8 of byte t/8.
#include "common.cuh"

__device__ __forceinline__ u32 reduce32(u32 h, u64 n) { return (u32)(((u64)h * n) >> 32); }
__device__ __forceinline__ u32 rotl32(u32 x, int r) { return (x << r) | (x >> (32 - r)); }
__device__ __forceinline__ u32 mm3(u32 key, u32 seed) {
  u32 k = key * 0xcc9e2d51u;
  k = rotl32(k, 15);
  k *= 0x1b873593u;
  u32 h = seed ^ k;
  h = rotl32(h, 13);
  h = h * 5u + 0xe6546b64u;
  h ^= 4u;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// tw_zen_hash: thread j inserts idx[j] (tag j+1). table: nparts × (r1+r2)
// slots; serial[p] counts serial writes of partition p (from 0); stored[p]
// counts the positions partition p holds in its table; the rest go to
// overflow[0..*novf) (positions).
extern "C" __global__ void tw_zen_hash(const u32* __restrict__ idx, u64 m, u32* table, u64 nparts, u64 r1, u64 r2,
                                       u64 k, const u32* __restrict__ seeds, u32* serial, u32* stored, u32* overflow,
                                       u32* novf) {
  u64 j = gtid();
  if (j >= m) return;
  u32 id = idx[j];
  u32 tag = (u32)j + 1;
  u32 p = reduce32(mm3(id, seeds[0]), nparts);
  u32* row = table + (u64)p * (r1 + r2);
  for (u64 s = 1; s <= k; s++) {
    u32 q = reduce32(mm3(id, seeds[s]), r1);
    if (atomicCAS(&row[q], 0u, tag) == 0u) {
      atomicAdd(&stored[p], 1u);
      return;
    }
  }
  u32 s = atomicAdd(&serial[p], 1u);
  if (s < r2) {
    row[r1 + s] = tag;
    atomicAdd(&stored[p], 1u);
    return;
  }
  overflow[atomicAdd(novf, 1u)] = (u32)j;
}

// tw_u32nz_count: counts[tile] = non-zero u32s of tile (TW_SEL_TILE words).
extern "C" __global__ void tw_u32nz_count(const u32* __restrict__ w, u64 n, u32* counts) {
  __shared__ u32 sc[TW_SEL_T / 32];
  u64 base = (u64)blockIdx.x * TW_SEL_TILE;
  u32 c = 0;
  for (int j = 0; j < TW_SEL_E; j++) {
    u64 i = base + (u64)j * TW_SEL_T + threadIdx.x;
    if (i < n) c += w[i] != 0;
  }
  for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0) sc[threadIdx.x / 32] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 t = 0;
    for (int q = 0; q < TW_SEL_T / 32; q++) t += sc[q];
    counts[blockIdx.x] = t;
  }
}

__device__ u32 zscan_excl(u32 v, u32* sh) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (u32 o = 1; o < TW_SEL_T; o <<= 1) {
    u32 a = threadIdx.x >= o ? sh[threadIdx.x - o] : 0;
    __syncthreads();
    sh[threadIdx.x] += a;
    __syncthreads();
  }
  u32 r = sh[threadIdx.x] - v;
  __syncthreads();
  return r;
}

// tw_u32nz_write: the hash memory's extraction: for every non-empty slot s
// in slot order, out[o] = w[s]-1 (a position); offs[tile] is the tile's
// output offset (host scan of tw_u32nz_count).
extern "C" __global__ void tw_u32nz_write(const u32* __restrict__ w, u64 n, const u64* __restrict__ offs, u32* out) {
  __shared__ u32 sh[TW_SEL_T];
  u64 base = (u64)blockIdx.x * TW_SEL_TILE + (u64)threadIdx.x * TW_SEL_E;
  u32 mine = 0;
  for (int j = 0; j < TW_SEL_E; j++) {
    u64 i = base + j;
    if (i < n) mine += w[i] != 0;
  }
  u64 o = offs[blockIdx.x] + zscan_excl(mine, sh);
  for (int j = 0; j < TW_SEL_E; j++) {
    u64 i = base + j;
    if (i < n && w[i] != 0) out[o++] = w[i] - 1;
  }
}

// tw_bitmap_pack: thread t writes byte t: bit b (LSB first) = x[8t+b] != ±0.
extern "C" __global__ void tw_bitmap_pack(const float* __restrict__ x, u8* bits, u64 n) {
  u64 t = gtid();
  if (t >= (n + 7) / 8) return;
  u32 b = 0;
  for (int j = 0; j < 8; j++) {
    u64 i = 8 * t + j;
    if (i < n && magkey(x[i]) != 0) b |= 1u << j;
  }
  bits[t] = (u8)b;
}

// tw_bitmap_count: counts[tile] = set bits in the tile's TW_SEL_T*4 bytes.
extern "C" __global__ void tw_bitmap_count(const u8* __restrict__ bits, u64 nbytes, u32* counts) {
  __shared__ u32 sc[TW_SEL_T / 32];
  u64 base = (u64)blockIdx.x * TW_SEL_T * 4;
  u32 c = 0;
  for (int j = 0; j < 4; j++) {
    u64 i = base + (u64)j * TW_SEL_T + threadIdx.x;
    if (i < nbytes) c += __popc(bits[i]);
  }
  for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0) sc[threadIdx.x / 32] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 t = 0;
    for (int q = 0; q < TW_SEL_T / 32; q++) t += sc[q];
    counts[blockIdx.x] = t;
  }
}

// tw_bitmap_decode: for set bit t (rank o among set bits): outidx[o] =
// table[t] (the partition's sorted index set) and, when out is not null,
// out[table[t]] += vals[o]. Thread t of a tile owns 4 consecutive bytes.
extern "C" __global__ void tw_bitmap_decode(const u8* __restrict__ bits, u64 nbits, const u32* __restrict__ table,
                                            const u64* __restrict__ offs, const float* __restrict__ vals,
                                            u32* outidx, float* out) {
  __shared__ u32 sh[TW_SEL_T];
  u64 nbytes = (nbits + 7) / 8;
  u64 b0 = (u64)blockIdx.x * TW_SEL_T * 4 + (u64)threadIdx.x * 4;
  u32 mine = 0;
  for (int j = 0; j < 4; j++)
    if (b0 + j < nbytes) mine += __popc(bits[b0 + j]);
  u64 o = offs[blockIdx.x] + zscan_excl(mine, sh);
  for (int j = 0; j < 4; j++) {
    u64 by = b0 + j;
    if (by >= nbytes) break;
    u32 b = bits[by];
    for (int q = 0; q < 8; q++) {
      if (b & (1u << q)) {
        u64 t = 8 * by + q;
        if (t < nbits) {
          u32 id = table[t];
          if (outidx) outidx[o] = id;
          if (out) out[id] = __fadd_rn(out[id], vals[o]);
        }
        o++;
      }
    }
  }
}
