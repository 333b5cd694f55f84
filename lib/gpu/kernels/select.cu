// Selection kernels shared by exact top-k, MSTopK, non-zero extraction and
// the hash bitmap: a radix histogram of magnitude keys, a threshold count,
// and an ordered two-class compaction.
//
// The compaction selects every element whose key is >= A ("always") and,
// of the elements with B <= key < A ("band"), those whose band rank (their
// position among the band elements in index order) lies in [lo, hi). It
// writes the selected values and indices in ascending index order, so the
// output is lib/codec's canonical sparse encoding. Exact top-k: A = kth+1,
// B = kth, [0, need). MSTopK: A = key(thres1), B = key(thres2), the window
// [start, start+need). Non-zeros: A = B = 1.
//
// The work is cut into tiles of TW_SEL_TILE elements (TW_SEL_T threads of
// TW_SEL_E consecutive elements); tw_sel_count writes each tile's class
// counts, the host scans them (tile order = index order) and tw_sel_write
// writes each tile's selection at its offset.
#include "common.cuh"

// tw_hist: for keys with (key & pmask) == prefix, counts bucket
// (key >> shift) & (nbins-1) into hist (nbins <= 2048).
extern "C" __global__ void tw_hist(const float* __restrict__ x, u64 n, u32* hist, u64 shift, u64 nbins, u64 pmask,
                                   u64 prefix) {
  __shared__ u32 h[2048];
  for (u32 j = threadIdx.x; j < nbins; j += blockDim.x) h[j] = 0;
  __syncthreads();
  u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = gtid(); i < n; i += stride) {
    u32 k = magkey(x[i]);
    if ((k & (u32)pmask) == (u32)prefix) atomicAdd(&h[(k >> shift) & (u32)(nbins - 1)], 1u);
  }
  __syncthreads();
  for (u32 j = threadIdx.x; j < nbins; j += blockDim.x)
    if (h[j]) atomicAdd(&hist[j], h[j]);
}

// tw_count_ge: adds #{i : key(x[i]) >= t} to *count (an MSTopK probe).
extern "C" __global__ void tw_count_ge(const float* __restrict__ x, u64 n, u64 t, u64* count) {
  u64 stride = (u64)gridDim.x * blockDim.x;
  u32 c = 0;
  for (u64 i = gtid(); i < n; i += stride) c += magkey(x[i]) >= (u32)t;
  for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(0xffffffffu, c, o);
  if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, (u64)c);
}

// tw_sel_count: counts[2*tile] = #always, counts[2*tile+1] = #band.
extern "C" __global__ void tw_sel_count(const float* __restrict__ x, u64 n, u64 A, u64 B, u32* counts) {
  __shared__ u32 sa[TW_SEL_T / 32], sb[TW_SEL_T / 32];
  u64 base = (u64)blockIdx.x * TW_SEL_TILE;
  u32 ca = 0, cb = 0;
  for (int j = 0; j < TW_SEL_E; j++) {
    u64 i = base + (u64)j * TW_SEL_T + threadIdx.x;  // coalesced: counting ignores order
    if (i < n) {
      u32 k = magkey(x[i]);
      ca += k >= (u32)A;
      cb += (k >= (u32)B) & (k < (u32)A);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    ca += __shfl_down_sync(0xffffffffu, ca, o);
    cb += __shfl_down_sync(0xffffffffu, cb, o);
  }
  if ((threadIdx.x & 31) == 0) {
    sa[threadIdx.x / 32] = ca;
    sb[threadIdx.x / 32] = cb;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    u32 ta = 0, tb = 0;
    for (int w = 0; w < TW_SEL_T / 32; w++) {
      ta += sa[w];
      tb += sb[w];
    }
    counts[2 * blockIdx.x] = ta;
    counts[2 * blockIdx.x + 1] = tb;
  }
}

// block-wide exclusive scan of one u32 per thread (TW_SEL_T threads);
// returns the thread's exclusive prefix.
__device__ u32 scan_excl(u32 v, u32* sh) {
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

// tw_sel_write: offs[2*tile] = output offset of the tile, offs[2*tile+1] =
// band elements before the tile (both from the host's scan of the counts).
// Thread t of a tile owns elements base + t*E .. base + t*E + E-1, read
// once (four 16-byte loads where x is aligned) and kept in registers for
// both passes. (Scalar loads read twice ran at 26% of an H100's memory
// bandwidth, these at ~55%.)
extern "C" __global__ void tw_sel_write(const float* __restrict__ x, u64 n, u64 A, u64 B, u64 lo, u64 hi,
                                        const u64* __restrict__ offs, float* vals, u32* idx) {
  __shared__ u32 sh[TW_SEL_T];
  u64 base = (u64)blockIdx.x * TW_SEL_TILE + (u64)threadIdx.x * TW_SEL_E;
  u32 cnt = base < n ? (u32)min((u64)TW_SEL_E, n - base) : 0u;  // my elements
  float v[TW_SEL_E];
  if (cnt == TW_SEL_E && ((u64)x & 15) == 0) {
#pragma unroll
    for (int q = 0; q < TW_SEL_E / 4; q++) {
      float4 f = ((const float4*)(x + base))[q];
      v[4 * q] = f.x;
      v[4 * q + 1] = f.y;
      v[4 * q + 2] = f.z;
      v[4 * q + 3] = f.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < TW_SEL_E; j++) v[j] = (u32)j < cnt ? x[base + j] : 0.0f;
  }
  u32 mine_a = 0, mine_b = 0;
#pragma unroll
  for (int j = 0; j < TW_SEL_E; j++) {
    if ((u32)j < cnt) {
      u32 k = magkey(v[j]);
      mine_a += k >= (u32)A;
      mine_b += (k >= (u32)B) & (k < (u32)A);
    }
  }
  u64 band0 = offs[2 * blockIdx.x + 1] + scan_excl(mine_b, sh);  // band rank of my first band element
  // how many I select: all "always" plus my band elements with rank in [lo, hi)
  u64 bl = max(band0, (u64)lo), bh = min(band0 + mine_b, (u64)hi);
  u32 mine = mine_a + (u32)(bh > bl ? bh - bl : 0);
  u64 out = offs[2 * blockIdx.x] + scan_excl(mine, sh);
  u64 r = band0;
#pragma unroll
  for (int j = 0; j < TW_SEL_E; j++) {
    if ((u32)j < cnt) {
      u32 k = magkey(v[j]);
      bool sel = k >= (u32)A;
      if (!sel && k >= (u32)B) {
        sel = r >= lo && r < hi;
        r++;
      }
      if (sel) {
        if (vals) vals[out] = v[j];
        if (idx) idx[out] = (u32)(base + j);
        out++;
      }
    }
  }
}
