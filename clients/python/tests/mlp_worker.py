#!/usr/bin/python3
"""One rank of the MLP tests (test_torch_mlp.py), run by torchrun with 4 CPU processes:

- GradSync with the fusion plan PLAN (a trainwire stream of one plan frame), then with its
  default groups, each in lockstep with gloo DDP (the same parameters before every step): both
  gradients of every step, and how many groups the hooks sent before synchronize();
- straggle_hook, TRAINWIRE_STRAGGLE_COMPUTE/_SLOW in the environment slowing rank 3's sidecar
  (the sleep before it hands each gradient over): gloo DDP for a few steps, the same steps with
  straggle_hook(mode="allreduce"), then straggle_hook(mode="groups") for a few rounds (with this
  rank's own gradients beside DDP's), then straggle_hook(mode="rna") with rank 3 running SLOW
  steps while the others run FAST; every reply's figures and the parameters.

usage: mlp_worker.py OUTDIR PLAN FAST SLOW
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
from trainwire.torch import GradSync, straggle_hook  # noqa: E402

LOCKSTEP, SLOW_RANK, GRADSYNC_STEPS, GROUP_ROUNDS = 3, 3, 4, 3


class PlanNet(nn.Module):
    """GradSync's model: its parameter names (fc1.weight, …) are what the fusion plan names."""

    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 1)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


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


def grads(models, x, y, after_backward=None):
    """Each model's flat gradient of the batch's loss: [model, params]."""
    out = []
    for m in models:
        m.zero_grad()
        nn.functional.mse_loss(m(x), y).backward()
        if after_backward is not None:
            after_backward(m)
        out.append(torch.cat([p.grad.reshape(-1) for p in m.parameters()]).numpy().copy())
    return np.stack(out)


def groups(rank, rounds):
    """straggle_hook(mode="groups"): every step's gradient as DDP got it and this rank's own."""
    m = net()
    local = net().module      # the same architecture, no DDP: this rank's own gradient
    state, hook = straggle_hook(m, mode="groups", rounds=rounds, timeout=60)
    m.register_comm_hook(state, hook)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    out = []
    for s in range(rounds):
        local.load_state_dict(m.module.state_dict())
        out.append(grads((m, local), *batch(rank, s)))
        opt.step()
    info = {"replies": state.replies, "requests": state.steps}
    state.close()
    dist.barrier()
    return np.stack(out), info


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


def gradsync(rank, plan, arrays, res):
    torch.manual_seed(0)
    ref = DDP(PlanNet())
    net3 = PlanNet()
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    for name, kw in (("plan", {"fusion_plan": plan}), ("default", {})):
        gs = GradSync(net3, timeout=60, **kw)
        steps, sent = [], []

        def synchronize(m, gs=gs, sent=sent):
            if m is net3:
                sent.append(gs._next)      # groups the hooks sent during backward
                gs.synchronize()
        for s in range(GRADSYNC_STEPS):
            net3.load_state_dict(ref.module.state_dict())
            steps.append(grads((ref, net3), *batch(rank, s), synchronize))
            opt.step()
        res["gradsync." + name] = {"sent_in_backward": sent, "requests": gs.requests, "groups": len(gs.groups)}
        arrays["gradsync." + name] = np.stack(steps)
        gs.close()
        dist.barrier()


def main():
    out, plan, fast, slow = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    res, arrays = {}, {}
    gradsync(rank, plan, arrays, res)
    for mode in ("gloo", "allreduce"):
        arrays[mode], res[mode] = run(mode, rank, LOCKSTEP)
    arrays["groups"], res["groups"] = groups(rank, GROUP_ROUNDS)
    arrays["rna"], res["rna"] = run("rna", rank, slow if rank == SLOW_RANK else fast)
    np.savez(os.path.join(out, "r%d.npz" % rank), **arrays)
    with open(os.path.join(out, "r%d.json" % rank), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
