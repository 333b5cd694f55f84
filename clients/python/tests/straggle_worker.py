#!/usr/bin/python3
"""One rank of the straggle hook test (test_torch_straggle.py), run by torchrun with 4 CPU
processes, TRAINWIRE_STRAGGLE_COMPUTE/_SLOW in the environment slowing rank 3's sidecar (the
sleep before it hands each gradient over): gloo DDP for a few steps, the same steps with
straggle_hook(mode="allreduce"), then straggle_hook(mode="rna") with rank 3 running SLOW steps
while the others run FAST. Saves every reply's figures and the parameters.

usage: straggle_worker.py OUTDIR FAST SLOW
"""

import json
import os
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from trainwire.torch import straggle_hook  # noqa: E402

LOCKSTEP, SLOW_RANK = 3, 3


def net():
    torch.manual_seed(0)
    return DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                             nn.Linear(64, 1)), bucket_cap_mb=0.01)   # several buckets


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(32, 16, generator=g), torch.randn(32, 1, generator=g)


def train(m, rank, steps):
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    for s in range(steps):
        x, y = batch(rank, s)
        opt.zero_grad()
        nn.functional.mse_loss(m(x), y).backward()
        opt.step()
    return torch.cat([p.detach().reshape(-1) for p in m.parameters()]).numpy().copy()


def run(mode, rank, steps):
    m = net()
    state = None
    if mode != "gloo":
        state, hook = straggle_hook(m, mode=mode, timeout=60)
        m.register_comm_hook(state, hook)
    params = train(m, rank, steps)
    out = {"steps": steps}
    if state is not None:
        out.update(replies=state.replies, requests=state.steps, dim=state.dim)
        state.close()
    dist.barrier()   # every rank's sidecar is gone before the next mode's join the mesh
    return params, out


def main():
    out, fast, slow = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    res, arrays = {}, {}
    for mode in ("gloo", "allreduce"):
        arrays[mode], res[mode] = run(mode, rank, LOCKSTEP)
    arrays["rna"], res["rna"] = run("rna", rank, slow if rank == SLOW_RANK else fast)
    np.savez(os.path.join(out, "r%d.npz" % rank), **arrays)
    with open(os.path.join(out, "r%d.json" % rank), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
