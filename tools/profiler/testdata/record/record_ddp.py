#!/usr/bin/python3
"""Record real PyTorch DDP traces (gloo backend, CPU) for profiler's fixtures.

Usage: /usr/bin/python3 record_ddp.py --world 2 --iters 3 --out DIR [--slow RANK]

(the fixtures: ../ddp-gloo-2 with --world 2 --iters 3, ../ddp-gloo-4 with
--world 4 --iters 3 --slow 2, gzipped)

Each rank writes DIR/rank-<r>.json with torch's own profiler
(export_chrome_trace). Debian's torch 1.13 is built without Kineto, so this
is the legacy autograd-profiler array form: a JSON array of "X" events with
pid "CPU functions", no distributedInfo (the rank comes from the file name).
Every iteration is wrapped in record_function("ProfilerStep#N") so the
profiler can find iterations, as Kineto's schedule does. Each rank also
writes DIR/rank-<r>.meta.json: the parameters (registration order) and DDP's
buckets (bytes, reduction order), which a legacy trace does not carry and
`profiler model`/`summary` read beside it. --slow RANK makes that rank sleep
40 ms into every step: a straggler the analyses must find.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


BUCKET_CAP_MB = 0.25


class Net(nn.Module):
    """A small convnet + MLP: a handful of gradients of distinct sizes."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 8 * 8, 256)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(x))
        x = torch.max_pool2d(torch.relu(self.conv2(x)), 2)
        x = torch.relu(self.fc1(x.flatten(1)))
        return self.fc2(x)


def worker(rank, world, port, iters, out, slow):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = DDP(Net(), bucket_cap_mb=BUCKET_CAP_MB)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 3, 16, 16)
    y = torch.randint(0, 10, (8,))
    for _ in range(2):  # warm-up: DDP rebuilds its buckets after the first iteration
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    dist.barrier()
    with torch.autograd.profiler.profile(use_kineto=False, record_shapes=True) as prof:
        for it in range(iters):
            with torch.autograd.profiler.record_function("ProfilerStep#%d" % it):
                if rank == slow:
                    # a deliberate straggler: 40 ms late into every step
                    time.sleep(0.04)
                opt.zero_grad()
                with torch.autograd.profiler.record_function("## forward ##"):
                    loss = nn.functional.cross_entropy(model(x), y)
                with torch.autograd.profiler.record_function("## backward ##"):
                    loss.backward()
                with torch.autograd.profiler.record_function("Optimizer.step#SGD.step"):
                    opt.step()
        # DDP's backward returns when gloo marks the last allreduce done, which its worker
        # thread does just before closing that op's record_function scope: leaving the
        # profiler at once can drop the last gloo:all_reduce event (seen 1 run in 4). Give
        # the worker threads time to close their scopes.
        time.sleep(0.5)
    prof.export_chrome_trace(os.path.join(out, "rank-%d.json" % rank))
    # The legacy trace carries no tensor sizes: a sidecar names the
    # parameters (registration order) and DDP's buckets (bytes, index order),
    # which `profiler model --params` reads.
    named = list(model.module.named_parameters())
    rev = list(reversed(named))  # DDP fills buckets in reverse registration order
    idx, _ = dist._compute_bucket_assignment_by_size(
        [p.detach() for _, p in rev], [dist._DEFAULT_FIRST_BUCKET_BYTES, int(BUCKET_CAP_MB * 1024 * 1024)], [False] * len(rev))
    meta = {
        "rank": rank,
        "world_size": world,
        "backend": "gloo",
        "params": [{"name": n, "numel": p.numel(), "dtype": "f32"} for n, p in model.module.named_parameters()],
        "bucket_cap_mb": BUCKET_CAP_MB,
        "buckets": [{"params": [rev[i][0] for i in b], "bytes": sum(rev[i][1].numel() * 4 for i in b)} for b in idx],
    }
    with open(os.path.join(out, "rank-%d.meta.json" % rank), "w") as f:
        json.dump(meta, f, indent=1)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--port", type=int, default=29517)
    ap.add_argument("--slow", type=int, default=-1, help="rank that does extra work each step")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    mp.spawn(worker, args=(a.world, a.port, a.iters, a.out, a.slow), nprocs=a.world)


if __name__ == "__main__":
    main()
