#!/usr/bin/python3
"""One rank of the compressor hook test (test_torch_compressor.py), run by torchrun with 4 CPU
processes:

- fp16 on the compressed ring, in lockstep with gloo DDP (the same parameters before every step):
  both gradients of every step;
- topk 25% with residual error feedback for STEPS steps: every step's synced gradient and the
  final parameters (equal on every rank: every rank applies the same average);
- the same run cut in two: STEPS//2 steps with save_every=STEPS//2, the hook closed, a new model
  with the parameters reached and a new hook given the saved EF state (state_in), the remaining
  steps: the synced gradients of the second half, to compare with the uncut run's;
- split_hook on an embedding + linear model (the embedding by hashsync zen, the linear layer by
  fp16 on the compressed ring), in lockstep with gloo DDP.

usage: compressor_worker.py OUTDIR STEPS
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
from trainwire.torch import compressor_hook, split_hook  # noqa: E402


def net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(32, 16, generator=g), torch.randn(32, 1, generator=g)


def step(m, opt, rank, s):
    x, y = batch(rank, s)
    opt.zero_grad()
    nn.functional.mse_loss(m(x), y).backward()
    g = torch.cat([p.grad.reshape(-1) for p in m.parameters()]).numpy().copy()
    opt.step()
    return g


def hooked(module, **kw):
    m = DDP(module, bucket_cap_mb=0.01)    # several buckets
    state, hook = compressor_hook(m, **kw)
    m.register_comm_hook(state, hook)
    return m, state


def lockstep_fp16(rank, steps):
    ref, (m, state) = DDP(net()), hooked(net(), algo="fp16", memory="none", collective="ring")
    out = []
    for s in range(steps):
        m.module.load_state_dict(ref.module.state_dict())
        o1, o2 = torch.optim.SGD(ref.parameters(), lr=0.05), torch.optim.SGD(m.parameters(), lr=0.05)
        out.append((step(ref, o1, rank, s), step(m, o2, rank, s)))
    state.close()
    return np.array(out)


class Rec(nn.Module):
    """An embedding (synced by hashsync, row-sparse) and a dense head (by the compressor)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.EmbeddingBag(5000, 8, mode="sum")
        self.fc = nn.Linear(8, 1)

    def forward(self, ids):
        return self.fc(self.emb(ids)).squeeze(1)


def lockstep_split(rank, steps):
    """split_hook (zen + fp16 ring) against gloo DDP at the same parameters every step."""
    ref, m = DDP(Rec()), DDP(Rec())
    state, hook = split_hook(m, scheme="zen", compressor=dict(algo="fp16", memory="none", collective="ring"))
    m.register_comm_hook(state, hook)
    out = []
    for s in range(steps):
        m.module.load_state_dict(ref.module.state_dict())
        g = torch.Generator().manual_seed(1000 * s + rank)
        ids, y = torch.randint(0, 5000, (16, 4), generator=g), torch.randn(16, generator=g)
        grads = []
        for model in (ref, m):
            model.zero_grad()
            nn.functional.mse_loss(model(ids), y).backward()
            grads.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy().copy())
        out.append(grads)
    info = {"sparse_requests": state.sparse.requests, "dense_requests": state.dense.requests}
    state.close()
    dist.barrier()
    return np.array(out), info


def topk_run(rank, first, last, module, state_in=None, save_every=0):
    m, state = hooked(module, algo="topk", ratio=0.25, memory="residual", collective="allgather",
                      state_in=state_in, save_every=save_every)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    grads = [step(m, opt, rank, s) for s in range(first, last)]
    saved = state.state_dict()
    state.close()
    dist.barrier()     # every rank's sidecar gone before the next hook's join the mesh
    return m.module, np.array(grads), saved


def main():
    out, steps = sys.argv[1], int(sys.argv[2])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    arrays = {"fp16": lockstep_fp16(rank, 3)}
    dist.barrier()
    whole, arrays["topk"], _ = topk_run(rank, 0, steps, net())
    arrays["topk.params"] = torch.cat([p.detach().reshape(-1) for p in whole.parameters()]).numpy()
    half = steps // 2
    first, _, saved = topk_run(rank, 0, half, net(), save_every=half)
    _, arrays["topk.resumed"], _ = topk_run(rank, half, steps, first, state_in=saved)
    arrays["split"], split_info = lockstep_split(rank, 3)
    np.savez(os.path.join(out, "r%d.npz" % rank), **arrays)
    with open(os.path.join(out, "r%d.json" % rank), "w") as f:
        json.dump(dict(split_info, saved_step=saved["step"], saved_bytes=len(saved["ef"] or b"")), f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
