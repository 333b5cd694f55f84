//go:build cudaemu

// cudaemu.cpp — the fiber scheduler of cudaemu.h and the launch table of
// the kernels, which are #included unchanged from kernels/*.cu.
// No FMA contraction (also: the x86-64 baseline target has no FMA unit).
#pragma GCC optimize("fp-contract=off")
#include "cudaemu.h"

#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

twDim threadIdx, blockIdx, blockDim, gridDim;

#include "kernels/quant.cu"
#include "kernels/select.cu"
#include "kernels/ef.cu"
#include "kernels/zen.cu"

namespace {

const size_t kStack = 64 * 1024;

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  bool done = false;
  int wait = 0;                  // 0 runnable, 1 block barrier, 2 warp shuffle
  unsigned long long gen = 0;    // the generation it waits to see pass
};

std::vector<Fiber> fibers;
ucontext_t sched;
int cur = 0;
int live = 0;
unsigned long long bgen = 0, barrived = 0;
std::vector<unsigned long long> wgen, warrived;
std::vector<unsigned long long> wbuf;  // [2][warps][32]
std::function<void()> body;
bool deadlock = false;

void trampoline() {
  body();
  fibers[cur].done = true;
  live--;
  // a thread that exits counts as arrived at a pending block barrier
  if (barrived > 0 && (int)barrived >= live) {
    barrived = 0;
    bgen++;
  }
  swapcontext(&fibers[cur].ctx, &sched);
}

void yield() { swapcontext(&fibers[cur].ctx, &sched); }

bool runnable(const Fiber& f, int idx) {
  if (f.done) return false;
  if (f.wait == 1) return bgen != f.gen;
  if (f.wait == 2) return wgen[idx / 32] != f.gen;
  return true;
}

void runBlock(int block) {
  if ((int)fibers.size() < block) fibers.resize(block);
  int warps = (block + 31) / 32;
  wgen.assign(warps, 0);
  warrived.assign(warps, 0);
  wbuf.assign(2 * warps * 32, 0);
  bgen = barrived = 0;
  live = block;
  for (int t = 0; t < block; t++) {
    Fiber& f = fibers[t];
    if (f.stack.size() != kStack) f.stack.resize(kStack);
    f.done = false;
    f.wait = 0;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, trampoline, 0);
  }
  for (;;) {
    bool any = false, progress = false;
    // Odd blocks visit their threads in reverse, so a read of shared
    // memory that lacks its __syncthreads cannot pass by luck of order.
    for (int i = 0; i < block; i++) {
      int t = (blockIdx.x & 1) ? block - 1 - i : i;
      Fiber& f = fibers[t];
      if (f.done) continue;
      any = true;
      if (!runnable(f, t)) continue;
      f.wait = 0;
      cur = t;
      threadIdx.x = t;
      swapcontext(&sched, &f.ctx);
      progress = true;
    }
    if (!any) return;
    if (!progress) {
      deadlock = true;
      return;
    }
  }
}

}  // namespace

void tw_emu_syncthreads() {
  Fiber& f = fibers[cur];
  unsigned long long g = bgen;
  if ((int)++barrived == live) {
    barrived = 0;
    bgen++;
    return;
  }
  f.wait = 1;
  f.gen = g;
  yield();
}

unsigned long long tw_emu_shfl(unsigned long long v, int src, int down) {
  int w = cur / 32, lane = cur % 32;
  unsigned long long g = wgen[w];
  unsigned long long* buf = &wbuf[((g & 1) * wgen.size() + w) * 32];
  buf[lane] = v;
  if (++warrived[w] == 32) {
    warrived[w] = 0;
    wgen[w]++;
  } else {
    Fiber& f = fibers[cur];
    f.wait = 2;
    f.gen = g;
    yield();
  }
  int s = down ? lane + src : src;
  if (s < 0 || s >= 32) return v;
  return buf[s];
}

namespace {
typedef unsigned long long U;
double D(U b) { double d; std::memcpy(&d, &b, 8); return d; }
template <class T> T* P(U a) { return reinterpret_cast<T*>(a); }

const std::map<std::string, std::function<void(const U*)>> table = {
  {"tw_sign_pack", [](const U* a) { tw_sign_pack(P<const float>(a[0]), P<u8>(a[1]), a[2], a[3], P<u32>(a[4]), P<u64>(a[5])); }},
  {"tw_sign_sums", [](const U* a) { tw_sign_sums(P<const float>(a[0]), a[1], P<double>(a[2])); }},
  {"tw_sumabs_max", [](const U* a) { tw_sumabs_max(P<const float>(a[0]), a[1], P<double>(a[2]), P<u32>(a[3]), P<u32>(a[4])); }},
  {"tw_sumsq", [](const U* a) { tw_sumsq(P<const float>(a[0]), a[1], P<double>(a[2])); }},
  {"tw_maxkey", [](const U* a) { tw_maxkey(P<const float>(a[0]), a[1], P<u32>(a[2]), P<u32>(a[3])); }},
  {"tw_terngrad", [](const U* a) { tw_terngrad(P<const float>(a[0]), P<u8>(a[1]), a[2], a[3], a[4], D(a[5])); }},
  {"tw_qsgd", [](const U* a) { tw_qsgd(P<const float>(a[0]), P<u8>(a[1]), a[2], a[3], a[4], a[5]); }},
  {"tw_fp16", [](const U* a) { tw_fp16(P<const float>(a[0]), P<u16>(a[1]), a[2], P<u32>(a[3])); }},
  {"tw_bf16", [](const U* a) { tw_bf16(P<const float>(a[0]), P<u16>(a[1]), a[2], P<u32>(a[3])); }},
  {"tw_hist", [](const U* a) { tw_hist(P<const float>(a[0]), a[1], P<u32>(a[2]), a[3], a[4], a[5], a[6]); }},
  {"tw_count_ge", [](const U* a) { tw_count_ge(P<const float>(a[0]), a[1], a[2], P<u64>(a[3])); }},
  {"tw_sel_count", [](const U* a) { tw_sel_count(P<const float>(a[0]), a[1], a[2], a[3], P<u32>(a[4])); }},
  {"tw_sel_write", [](const U* a) { tw_sel_write(P<const float>(a[0]), a[1], a[2], a[3], a[4], a[5], P<const u64>(a[6]), P<float>(a[7]), P<u32>(a[8])); }},
  {"tw_ef_compensate", [](const U* a) { tw_ef_compensate(P<const float>(a[0]), P<const float>(a[1]), P<float>(a[2]), a[3], a[4], a[5], a[6]); }},
  {"tw_ef_update", [](const U* a) { tw_ef_update(P<const float>(a[0]), P<const float>(a[1]), P<float>(a[2]), a[3]); }},
  {"tw_scatter", [](const U* a) { tw_scatter(P<float>(a[0]), P<const u32>(a[1]), P<const float>(a[2]), a[3]); }},
  {"tw_unpack_select", [](const U* a) { tw_unpack_select(P<const u8>(a[0]), P<float>(a[1]), a[2], a[3], a[4]); }},
  {"tw_terngrad_decode", [](const U* a) { tw_terngrad_decode(P<const u8>(a[0]), P<float>(a[1]), a[2], a[3], a[4]); }},
  {"tw_qsgd_decode", [](const U* a) { tw_qsgd_decode(P<const signed char>(a[0]), P<float>(a[1]), a[2], a[3]); }},
  {"tw_half_decode", [](const U* a) { tw_half_decode(P<const u16>(a[0]), P<float>(a[1]), a[2], a[3]); }},
  {"tw_zen_hash", [](const U* a) { tw_zen_hash(P<const u32>(a[0]), a[1], P<u32>(a[2]), a[3], a[4], a[5], a[6], P<const u32>(a[7]), P<u32>(a[8]), P<u32>(a[9]), P<u32>(a[10]), P<u32>(a[11])); }},
  {"tw_u32nz_count", [](const U* a) { tw_u32nz_count(P<const u32>(a[0]), a[1], P<u32>(a[2])); }},
  {"tw_u32nz_write", [](const U* a) { tw_u32nz_write(P<const u32>(a[0]), a[1], P<const u64>(a[2]), P<u32>(a[3])); }},
  {"tw_bitmap_pack", [](const U* a) { tw_bitmap_pack(P<const float>(a[0]), P<u8>(a[1]), a[2]); }},
  {"tw_bitmap_count", [](const U* a) { tw_bitmap_count(P<const u8>(a[0]), a[1], P<u32>(a[2])); }},
  {"tw_bitmap_decode", [](const U* a) { tw_bitmap_decode(P<const u8>(a[0]), a[1], P<const u32>(a[2]), P<const u64>(a[3]), P<const float>(a[4]), P<u32>(a[5]), P<float>(a[6])); }},
};
}  // namespace

// tw_emu_launch runs kernel name on grid blocks of block threads (blocks in
// order, threads as fibers). It returns 0, 1 for an unknown kernel, 2 on a
// barrier deadlock.
// Kernels with no __syncthreads and no shuffle run their threads as plain
// calls, in order; the others run as fibers.
const char* const kNoBarrier[] = {"tw_terngrad", "tw_qsgd", "tw_ef_compensate", "tw_ef_update", "tw_scatter",
                                  "tw_unpack_select", "tw_terngrad_decode", "tw_qsgd_decode", "tw_half_decode",
                                  "tw_zen_hash", "tw_bitmap_pack"};

extern "C" int tw_emu_launch(const char* name, int grid, int block, const unsigned long long* args) {
  auto it = table.find(name);
  if (it == table.end()) return 1;
  const U* a = args;
  body = [&]() { it->second(a); };
  gridDim.x = grid;
  blockDim.x = block;
  deadlock = false;
  bool plain = false;
  for (const char* k : kNoBarrier) plain = plain || std::string(k) == name;
  for (int b = 0; b < grid; b++) {
    blockIdx.x = b;
    if (plain) {
      for (int i = 0; i < block; i++) {
        threadIdx.x = (b & 1) ? block - 1 - i : i;
        body();
      }
      continue;
    }
    runBlock(block);
    if (deadlock) return 2;
  }
  return 0;
}
