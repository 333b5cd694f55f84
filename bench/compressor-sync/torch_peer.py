"""bench/compressor-sync/torch_peer.py — one torch.distributed (gloo) rank syncing the gradients
of a trainwire stream the way DDP would, for bench/compressor-sync/run.sh.

    torch_peer.py --rank R --world N --master HOST:PORT --impl dense|fp16|powersgd [--rank4 4]
                  [--buckets-mb 25] STREAM

STREAM holds dense f32 gradient frames with step_end frames (gen.py). The tensors of each step are
packed into DDP-like buckets (gradients in stream order = backprop order, a new bucket when the
next tensor would pass --buckets-mb MiB; DDP's first 1 MiB bucket is not modelled), and each
bucket goes through the communication hook DDP would call, on an object with GradBucket's methods
(buffer, index, gradients — views into the buffer —, is_last, set_buffer):
  dense     dist.all_reduce of the bucket (DDP's default allreduce_hook, without its division)
  fp16      torch.distributed.algorithms.ddp_comm_hooks.default_hooks.fp16_compress_hook
  powersgd  powerSGD_hook.powerSGD_hook, PowerSGDState(matrix_approximation_rank=--rank4,
            start_powerSGD_iter=2, error feedback and warm start on, torch's defaults otherwise)
All hooks of a step are started, then their futures waited (DDP's order); powersgd's one bucket
after the other (its chained allreduces, issued from gloo's threads, must not interleave). Timed per step, after
a barrier: hooks started to last future done; bucket packing excluded. powersgd runs two extra
vanilla (allreduce) iterations first (start_powerSGD_iter=2 is the least DDP allows with error
feedback) and they are not reported; nor is the first iteration of the measured kind (as ours'
first step). Prints one JSON line per step on rank 0 with every rank's
time (gathered) and the eth0/lo bytes this rank sent (from /proc/net/dev, its namespace's).
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as psgd

sys.path.insert(0, __file__.rsplit("/bench/", 1)[0] + "/clients/python")
from trainwire import wire  # noqa: E402


class Bucket:
    """Duck-typed dist.GradBucket."""

    def __init__(self, index, tensors, last):
        self._index, self._last = index, last
        self._buf = torch.cat([t.reshape(-1) for t in tensors])
        self._grads, off = [], 0
        for t in tensors:
            self._grads.append(self._buf[off:off + t.numel()].view(t.shape))
            off += t.numel()

    def buffer(self):
        return self._buf

    def index(self):
        return self._index

    def gradients(self):
        return self._grads

    def is_last(self):
        return self._last

    def set_buffer(self, b):
        self._buf.copy_(b)

    def parameters(self):
        return self._grads


def read_steps(path):
    """The dense frames grouped by their step field, in stream order."""
    steps = {}
    with open(path, "rb") as f:
        for fr in wire.Reader(f):
            if fr["t"] == "dense":
                a = np.frombuffer(fr["data"], "<f4").reshape(fr["shape"])
                steps.setdefault(fr["step"], []).append(torch.from_numpy(a.copy()))
    return [steps[s] for s in sorted(steps)]


def buckets_of(tensors, cap):
    groups, cur, size = [], [], 0
    for t in tensors:
        b = t.numel() * 4
        if cur and size + b > cap:
            groups.append(cur)
            cur, size = [], 0
        cur.append(t)
        size += b
    if cur:
        groups.append(cur)
    return groups


def tx_bytes():
    tot = 0
    with open("/proc/net/dev") as f:
        for line in f.readlines()[2:]:
            name, rest = line.split(":", 1)
            if name.strip() in ("eth0", "lo"):
                tot += int(rest.split()[8])
    return tot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--impl", choices=["dense", "fp16", "powersgd"], required=True)
    ap.add_argument("--rank4", type=int, default=4)
    ap.add_argument("--buckets-mb", type=float, default=25)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("stream")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    host, port = a.master.rsplit(":", 1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = host, port
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
    steps = read_steps(a.stream)
    cap = int(a.buckets_mb * 1024 * 1024)
    state = None
    if a.impl == "powersgd":
        state = psgd.PowerSGDState(process_group=None, matrix_approximation_rank=a.rank4,
                                   start_powerSGD_iter=2)
    warm = 2 if a.impl == "powersgd" else 0
    # the first iteration of the measured kind is warm-up too, as ours' first step
    iters = [(i % len(steps), i <= warm) for i in range(warm + len(steps))]
    for it, (s, vanilla) in enumerate(iters):
        groups = buckets_of(steps[s], cap)
        bs = [Bucket(i, g, i == len(groups) - 1) for i, g in enumerate(groups)]
        dist.barrier()
        tx0 = tx_bytes()
        t0 = time.perf_counter()
        futs = []
        for b in bs:
            if a.impl == "dense":
                futs.append(dist.all_reduce(b.buffer(), async_op=True).get_future())
            elif a.impl == "fp16":
                futs.append(default_hooks.fp16_compress_hook(None, b))
            else:
                # one bucket at a time: the hook's chained allreduces are issued from gloo's
                # callback threads, and two buckets in flight reach the ranks in different orders
                psgd.powerSGD_hook(state, b).wait()
        for f in futs:
            f.wait()
        dt = time.perf_counter() - t0
        tx = tx_bytes() - tx0
        out = [None] * a.world
        dist.all_gather_object(out, {"rank": a.rank, "time_s": dt, "tx_bytes": tx})
        if a.rank == 0:
            print(json.dumps({"impl": "torch-" + a.impl, "iter": it, "step": s,
                              "warmup": vanilla, "buckets": len(bs), "ranks": out}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
