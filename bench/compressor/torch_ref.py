#!/usr/bin/env python3
"""PyTorch (and numpy) reference timings for bench/compressor/run.sh.

    torch_ref.py gen FILE N SEED        write N float32 N(0,1) values (numpy, seeded) as a
                                        trainwire stream with one dense frame
    torch_ref.py time FILE THREADS ITERS [OPS]
                                        time each op on that tensor with torch.set_num_threads(THREADS),
                                        one JSON line per op on stdout

Ops (torch-written, as a PyTorch user would write them on the CPU):
  memcpy_numpy  np.copyto(dst, x)
  memcpy_torch  dst.copy_(x)
  topk          torch.topk(x.abs(), k, sorted=False) and x[idx], k = ceil(0.01 d)
  signsgd       bits = x >= 0, packed MSB-first into uint8 with shifts and ors
  packbits      np.packbits(x >= 0)  (numpy's C packer, for reference)
  onebit        mask = x < 0, the two means, mask packed as signsgd
  fp16          x.half()
  qsgd          s = 64: norm, floor(s|x|/norm) + Bernoulli(frac) via torch.rand_like, int8 codes
Run with /usr/bin/python3 (torch 1.13 and numpy live there).
"""
import json
import math
import sys
import time

import numpy as np

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] + "/clients/python")
from trainwire import wire  # noqa: E402


def gen(path, n, seed):
    x = np.random.default_rng(seed).standard_normal(n, dtype=np.float32)
    with open(path, "wb") as f:
        wire.write_stream(f, [wire.dense("bench", x)], producer="bench/compressor")


def load(path):
    with open(path, "rb") as f:
        for fr in wire.Reader(f):
            if fr["t"] == "dense":
                return np.frombuffer(fr["data"], "<f4").copy()
    raise SystemExit("no dense frame in " + path)


def pack_bits(b):
    """b: bool tensor of length multiple of 8 → uint8, MSB first."""
    v = b.view(-1, 8).to(torch.uint8)
    out = v[:, 0] << 7
    for i in range(1, 8):
        out |= v[:, i] << (7 - i)
    return out


def main():
    global torch
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    import torch
    path, threads, iters = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ops = sys.argv[5].split(",") if len(sys.argv) > 5 else [
        "memcpy_numpy", "memcpy_torch", "topk", "signsgd", "packbits", "onebit", "fp16", "qsgd"]
    torch.set_num_threads(threads)
    xn = load(path)
    x = torch.from_numpy(xn)
    d = x.numel()
    k = math.ceil(0.01 * d)
    dst_n = np.empty_like(xn)
    dst_t = torch.empty_like(x)
    s = 64

    def topk():
        v, i = torch.topk(x.abs(), k, sorted=False)
        return x[i], i

    def onebit():
        m = x < 0
        nneg = int(m.sum())
        sneg = float(torch.where(m, x, torch.zeros((), dtype=x.dtype)).sum())
        spos = float(x.sum()) - sneg
        return pack_bits(m), sneg / max(nneg, 1), spos / max(d - nneg, 1)

    def qsgd():
        norm = x.norm()
        lv = x.abs() / norm * s
        l = lv.floor()
        l += (torch.rand_like(x) < (lv - l)).to(x.dtype)
        return (l * x.sign()).to(torch.int8), norm

    fns = {
        "memcpy_numpy": lambda: np.copyto(dst_n, xn),
        "memcpy_torch": lambda: dst_t.copy_(x),
        "topk": topk,
        "signsgd": lambda: pack_bits(x >= 0),
        "packbits": lambda: np.packbits(xn >= 0),
        "onebit": onebit,
        "fp16": lambda: x.half(),
        "qsgd": qsgd,
    }
    for op in ops:
        fn = fns[op]
        n = iters if op != "topk" else max(2, min(iters, 3))
        fn()  # warm-up
        ts = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        print(json.dumps({"impl": "torch", "op": op, "threads": threads, "bytes": 4 * d,
                          "s_mean": sum(ts) / len(ts), "s_min": min(ts), "iters": n}), flush=True)


if __name__ == "__main__":
    main()
