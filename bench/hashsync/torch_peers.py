#!/usr/bin/python3
"""Torch peers for bench/hashsync: the same sparse embedding gradients, synchronized three ways
with torch.distributed's gloo backend, one process per rank.

    torch_peers.py --impl dense|agsparse|sparse --rank R --world W --master HOST:PORT DATA

DATA is this rank's `hashsync gen` stream (one row-sparse frame per step). Per step: the tensor is
built untimed (dense for `dense`; indices + values for the others), every rank meets at a
barrier, then the timed part runs, and the step's time is the slowest rank's:

  dense     all_reduce of the dense float32 tensor (the gradient as DDP has it without
            sparse=True); sparse result: + extraction of the non-zero rows (nonzero, index_select)
  agsparse  AGsparse as torch users write it: all_gather of the counts, then all_gather of the
            padded indices and of the padded values; sparse result: sparse_coo_tensor(cat).coalesce();
            dense result: zeros().index_add_()
  sparse    torch's own sparse all_reduce of a row-sparse sparse_coo_tensor (indices [1, nnz],
            values [nnz, width]), as nn.Embedding(sparse=True) gradients are; sparse result:
            .coalesce(); dense result: .to_dense()

Both result forms are timed in the same step: the sparse one first, the dense one as an extra
conversion of the same result (the time of each form is reported). The first --warmup steps are
not reported. Rank 0 prints one JSON line per step and form on stdout:
{"impl":..., "form":"sparse"|"dense", "step":k, "time_s":t, "world":W, "checksum":float}
checksum = sum of |result| (the same for every implementation up to float rounding).
"""

import argparse
import datetime
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
from trainwire import wire  # noqa: E402


def log(*a):
    print("torch_peers:", *a, file=sys.stderr, flush=True)


def load(path):
    frames = []
    with open(path, "rb") as f:
        for fr in wire.Reader(f):
            if fr["t"] != "sparse":
                continue
            idx = wire.sparse_indices(fr).astype(np.int64)
            val = wire.sparse_values(fr).astype(np.float32, copy=False)
            rows = int(np.prod(fr["shape"])) // fr["width"]
            frames.append((rows, fr["width"], torch.from_numpy(idx.copy()), torch.from_numpy(val.copy())))
    return frames


def slowest(t):
    x = torch.tensor([t], dtype=torch.float64)
    dist.all_reduce(x, op=dist.ReduceOp.MAX)
    return x.item()


def run_dense(rows, width, idx, val):
    d = torch.zeros(rows, width)
    d[idx] = val
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(d)
    t1 = time.perf_counter()
    nz = d.abs().sum(1).nonzero().squeeze(1)
    sp = (nz, d.index_select(0, nz))
    t2 = time.perf_counter()
    return (t2 - t0), (t1 - t0), float(sp[1].abs().sum())


def run_agsparse(rows, width, idx, val):
    w = dist.get_world_size()
    dist.barrier()
    t0 = time.perf_counter()
    n = torch.tensor([idx.numel()], dtype=torch.int64)
    counts = [torch.zeros(1, dtype=torch.int64) for _ in range(w)]
    dist.all_gather(counts, n)
    m = int(max(c.item() for c in counts))
    pi = torch.zeros(m, dtype=torch.int64)
    pi[: idx.numel()] = idx
    pv = torch.zeros(m, width)
    pv[: idx.numel()] = val
    gi = [torch.empty(m, dtype=torch.int64) for _ in range(w)]
    gv = [torch.empty(m, width) for _ in range(w)]
    dist.all_gather(gi, pi)
    dist.all_gather(gv, pv)
    ai = torch.cat([g[: int(c.item())] for g, c in zip(gi, counts)])
    av = torch.cat([g[: int(c.item())] for g, c in zip(gv, counts)])
    t1 = time.perf_counter()
    sp = torch.sparse_coo_tensor(ai.unsqueeze(0), av, (rows, width)).coalesce()
    t2 = time.perf_counter()
    dense = torch.zeros(rows, width).index_add_(0, ai, av)
    t3 = time.perf_counter()
    return (t2 - t0), (t1 - t0) + (t3 - t2), float(sp.values().abs().sum())


def run_sparse(rows, width, idx, val):
    s = torch.sparse_coo_tensor(idx.unsqueeze(0), val, (rows, width)).coalesce()
    dist.barrier()
    t0 = time.perf_counter()
    dist.all_reduce(s)
    t1 = time.perf_counter()
    sp = s.coalesce()
    t2 = time.perf_counter()
    dense = s.to_dense()
    t3 = time.perf_counter()
    return (t2 - t0), (t1 - t0) + (t3 - t1), float(sp.values().abs().sum())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data")
    ap.add_argument("--impl", choices=["dense", "agsparse", "sparse"], required=True)
    ap.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "0")))
    ap.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", "1")))
    ap.add_argument("--master", default=None)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    host, port = (a.master or "%s:%s" % (os.environ.get("MASTER_ADDR", "127.0.0.1"), os.environ.get("MASTER_PORT", "29500"))).rsplit(":", 1)
    frames = load(a.data)
    dist.init_process_group("gloo", init_method="tcp://%s:%s" % (host, port), rank=a.rank, world_size=a.world,
                            timeout=datetime.timedelta(seconds=a.timeout))
    fn = {"dense": run_dense, "agsparse": run_agsparse, "sparse": run_sparse}[a.impl]
    for k, (rows, width, idx, val) in enumerate(frames):
        ts, td, chk = fn(rows, width, idx, val)
        ts, td = slowest(ts), slowest(td)
        if a.rank == 0 and k >= a.warmup:
            for form, t in (("sparse", ts), ("dense", td)):
                print(json.dumps({"impl": "torch-" + a.impl, "form": form, "step": k, "time_s": t, "world": a.world, "checksum": chk}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
