#!/usr/bin/python3
"""One rank of the GradSync test (test_torch_gradsync.py) under torchrun, 4 CPU processes: an MLP
whose gradients go through GradSync with the fusion plan PLAN (a trainwire stream of one plan
frame) and, in lockstep (the same parameters before every step), through gloo DDP; saves both
gradients of every step and how many groups were sent before synchronize() was called.

usage: gradsync_worker.py OUTDIR PLAN STEPS
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
from trainwire.torch import GradSync  # noqa: E402


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(16, 32), nn.Linear(32, 32), nn.Linear(32, 1)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(32, 16, generator=g), torch.randn(32, 1, generator=g)


def main():
    out, plan, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    ref = DDP(Net())
    net = Net()
    opt = torch.optim.SGD(ref.parameters(), lr=0.05)
    res = {}
    for name, kw in (("plan", {"fusion_plan": plan}), ("default", {})):
        gs = GradSync(net, timeout=60, **kw)
        grads, sent = [], []
        for s in range(steps):
            net.load_state_dict(ref.module.state_dict())
            x, y = batch(rank, s)
            gs_pair = []
            for m in (ref, net):
                m.zero_grad()
                nn.functional.mse_loss(m(x), y).backward()
                if m is net:
                    sent.append(gs._next)      # groups the hooks sent during backward
                    gs.synchronize()
                gs_pair.append(torch.cat([p.grad.reshape(-1) for p in m.parameters()]).numpy().copy())
            grads.append(np.stack(gs_pair))
            opt.step()
        res[name] = {"sent_in_backward": sent, "requests": gs.requests, "groups": len(gs.groups)}
        np.save(os.path.join(out, "r%d-%s.npy" % (rank, name)), np.stack(grads))
        gs.close()
        dist.barrier()
    np.savez(os.path.join(out, "r%d.npz" % rank), **{k: np.load(os.path.join(out, "r%d-%s.npy" % (rank, k)))
                                                     for k in res})
    with open(os.path.join(out, "r%d.json" % rank), "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
