#!/usr/bin/python3
"""One rank of the Checkpointer test (test_torch_checkpoint.py) under torchrun: a deterministic
MLP trained with gloo DDP and SGD with momentum for STEPS steps, an extra state (a running sum
of the losses) beside it: first uninterrupted without checkpoints (the reference), then with a
Checkpointer saving to this rank's ckpt agent ($TRAINWIRE_CKPT_SOCKET) every EVERY steps and
restoring at start; with KILL > 0, rank 1 of the first attempt kills itself with SIGKILL once step
KILL of the second run is done (torchrun --max_restarts 1 then restarts every rank), and kills
first the agent whose pid is $TW_TEST_AGENT_PID if set. Writes both runs' final parameters and
what the second restored.

usage: ckpt_worker.py OUTDIR STEPS EVERY KILL
"""

import json
import os
import signal
import sys

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from trainwire.torch import Checkpointer  # noqa: E402

VICTIM = 1


class FlatMLP(nn.Module):
    """16 -> 32 (tanh) -> 1 with every weight in one parameter: DDP's one bucket then has the
    same layout before and after its rebuild, so gloo sums in the same order on the first step
    after a restart as at that step of an uninterrupted run (with several parameters, the
    rebuilt order can differ from the initial one, and the sums by the last bit)."""

    def __init__(self):
        super().__init__()
        self.p = nn.Parameter(torch.randn(16 * 32 + 32 + 32 + 1) * 0.25)

    def forward(self, x):
        w1, b1 = self.p[:512].view(32, 16), self.p[512:544]
        w2, b2 = self.p[544:576].view(1, 32), self.p[576:]
        return nn.functional.linear(torch.tanh(nn.functional.linear(x, w1, b1)), w2, b2)


def batch(rank, step):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(32, 16, generator=g), torch.randn(32, 1, generator=g)


def main():
    out, steps, every, kill = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    ref = train(rank, steps, 0, 0, attempt)   # the uninterrupted run, no checkpoints
    params, seen, info = train(rank, steps, every, kill, attempt)
    np.savez(os.path.join(out, "r%d.npz" % rank), params=params, seen=seen, ref_params=ref[0], ref_seen=ref[1])
    with open(os.path.join(out, "r%d.json" % rank), "w") as f:
        json.dump(info, f)
    dist.barrier()


def train(rank, steps, every, kill, attempt):
    torch.manual_seed(0)
    model = DDP(FlatMLP())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    extra = {"seen": torch.zeros(1, dtype=torch.float64), "note": {"attempts": [attempt]}}
    start, ck = 0, None
    if every > 0:
        ck = Checkpointer(model, opt, every=every, extra=extra)
        start = ck.restore()
        extra = ck.extra
        extra["note"]["attempts"].append(attempt)
    for it in range(start, steps):
        x, y = batch(rank, it)
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        extra["seen"] += loss.detach().double()
        if kill and attempt == 0 and rank == VICTIM and it + 1 == kill:
            sys.stdout.flush()
            agent = os.environ.get("TW_TEST_AGENT_PID")
            if agent:   # the machine's failure: this rank's agent (and its memory) dies too
                os.kill(int(agent), signal.SIGKILL)
            os.kill(os.getpid(), signal.SIGKILL)
        if ck is not None:
            ck.step(it + 1)
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).numpy()
    info = {"attempt": attempt, "start": start, "saved": ck.saved if ck else [],
            "source": ck.restored[1] if ck else None, "attempts": extra["note"]["attempts"]}
    if ck is not None:
        ck.close()
    return params, extra["seen"].numpy(), info


if __name__ == "__main__":
    main()
