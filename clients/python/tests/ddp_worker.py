#!/usr/bin/python3
"""One rank of the DDP hook test (test_torch_hooks.py), run by torchrun with 4 CPU processes:
trains a small embedding model for STEPS steps with gloo DDP, then with hashsync_hook(dense)
and hashsync_hook(zen), and saves every step's loss and gradients; then runs gloo DDP and each
hook in lockstep (same parameters at every step) and saves both gradients and this rank's own
(unsynchronized) gradient; then kills rank 1's sidecar
mid-training and records what each rank's backward raised, and how fast.

usage: ddp_worker.py OUTDIR STEPS
"""

import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from trainwire.torch import hashsync_hook  # noqa: E402

ROWS, WIDTH, BAG, BATCH = 20000, 16, 8, 32   # tables of 1.25 MiB: DDP makes 2 buckets


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.EmbeddingBag(ROWS, WIDTH, mode="sum")
        self.emb2 = nn.EmbeddingBag(ROWS, WIDTH, mode="sum")
        self.fc1 = nn.Linear(2 * WIDTH, 32)
        self.fc2 = nn.Linear(32, 1)

    def forward(self, ids):
        x = torch.cat([self.emb(ids), self.emb2((ids * 7919) % ROWS)], 1)
        return self.fc2(torch.relu(self.fc1(x))).squeeze(1)


def batch(rank, step):
    rng = np.random.default_rng(1000 * step + rank)
    ids = np.minimum(rng.zipf(1.3, (BATCH, BAG)) - 1, ROWS - 1)   # a few hot rows, many cold
    return torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(rng.random(BATCH, np.float32))


def model(mode, **kw):
    torch.manual_seed(0)
    m = DDP(Net(), bucket_cap_mb=0.05)
    state = None
    if mode != "gloo":
        state, hook = hashsync_hook(scheme=mode, **kw)
        m.register_comm_hook(state, hook)
    return m, state


def train(mode, rank, steps):
    m, state = model(mode)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    losses, grads = [], []
    t0 = time.monotonic()
    for s in range(steps):
        ids, y = batch(rank, s)
        opt.zero_grad()
        loss = nn.functional.mse_loss(m(ids), y)
        loss.backward()
        losses.append(loss.item())
        grads.append(torch.cat([p.grad.reshape(-1) for p in m.parameters()]).numpy().copy())
        opt.step()
    info = {"seconds": time.monotonic() - t0}
    if state is not None:
        info["requests"] = state.requests
        state.close()
    dist.barrier()   # every rank's sidecar is gone before the next mode's join the mesh
    return np.array(losses), np.stack(grads), info


def lockstep(mode, rank, steps):
    """Per-step gradients at the same parameters: the hook's model takes the gloo model's
    parameters before every step, so what differs is the sync alone (no drift)."""
    ref, _ = model("gloo")
    hk, state = model(mode)
    local = Net()    # this rank's own gradient at the same parameters, unsynchronized
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    out = []
    for s in range(steps):
        hk.module.load_state_dict(ref.module.state_dict())
        local.load_state_dict(ref.module.state_dict())
        ids, y = batch(rank, s)
        gs = []
        for m in (ref, hk, local):
            m.zero_grad()
            nn.functional.mse_loss(m(ids), y).backward()
            gs.append(torch.cat([p.grad.reshape(-1) for p in m.parameters()]).numpy().copy())
        out.append(np.stack(gs))
        opt.step()
    state.close()
    dist.barrier()
    return np.stack(out)


def dead_sidecar(rank):
    """Two good steps, then rank 1 kills its sidecar: every rank's next backward must raise."""
    m, state = model("dense", timeout=30)
    for s in range(3):
        ids, y = batch(rank, s)
        if s == 2:
            dist.barrier()
            if rank == 1:
                state.sidecar.proc.kill()
                state.sidecar.proc.wait()
        t0 = time.monotonic()
        try:
            nn.functional.mse_loss(m(ids), y).backward()
        except Exception as e:  # noqa: B902 - what the test looks at
            return {"step": s, "error": "%s: %s" % (type(e).__name__, e),
                    "seconds": time.monotonic() - t0}
    return {"step": None, "error": None}


def main():
    out, steps = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    res, arrays = {}, {}
    for mode in ("gloo", "dense", "zen"):
        arrays[mode + ".loss"], arrays[mode + ".grads"], res[mode] = train(mode, rank, steps)
    for mode in ("dense", "zen"):
        arrays[mode + ".lockstep"] = lockstep(mode, rank, steps)
    res["shapes"] = [list(p.shape) for p in Net().parameters()]
    res["dead"] = dead_sidecar(rank)
    np.savez(os.path.join(out, "r%d.npz" % rank), **arrays)
    with open(os.path.join(out, "r%d.json" % rank), "w") as f:
        json.dump(res, f)
    sys.stdout.flush()
    os._exit(0)   # DDP's reducer after a failed backward: skip its teardown


if __name__ == "__main__":
    main()
