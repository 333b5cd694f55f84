#!/usr/bin/python3
"""One rank of the hooks' failure-contract test (test_torch_failures.py). Started by the test
itself, not torchrun (whose agent would tear the survivors down when a rank dies): RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT by hand, each rank in its own session (so the test can
kill a rank with its sidecar). Runs the SCENARIOS in order, recording after each what every
rank's backward raised and how long it took, into OUTDIR/r<rank>.json:

  shapes            hashsync dense sidecars; rank 1 syncs 5 elements, the others 4
  straggle-shapes   the same with straggle rna sidecars (rank 1's --dim 5)
  straggle-sidecar  straggle rna; rank 1 kills its own sidecar before its third step
  peer              hashsync dense; rank 2 kills itself and its sidecar (its session) mid-job
  orphan            hashsync dense; rank 2's trainer dies with SIGKILL, its sidecar lives on
  straggle-peer     straggle allreduce; rank 2 kills itself and its sidecar mid-job

usage: fail_worker.py OUTDIR SCENARIO...
"""

import json
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from trainwire.torch import hashsync_hook, start_sidecar, straggle_hook  # noqa: E402

TIMEOUT = 30   # the hooks' reply deadline: every failure must come well before it


def net(cap):
    torch.manual_seed(0)
    return DDP(nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 1)), bucket_cap_mb=cap)


def steps(m, rank, n, before=None):
    """n steps; before(s) runs before step s's backward. The first exception: a record."""
    for s in range(n):
        g = torch.Generator().manual_seed(100 * s + rank)
        x, y = torch.randn(8, 16, generator=g), torch.randn(8, 1, generator=g)
        if before:
            before(s)
        t0 = time.monotonic()
        try:
            nn.functional.mse_loss(m(x), y).backward()
        except Exception as e:  # noqa: B902 - what the test looks at
            return {"step": s, "error": "%s: %s" % (type(e).__name__, e), "seconds": time.monotonic() - t0}
    return {"step": None, "error": None, "steps": n}


def die_at(s_kill, rank, victim, state, session):
    def before(s):
        if s == s_kill:
            dist.barrier()   # every rank is past its good steps
            if rank == victim:
                sys.stdout.flush()
                if session:
                    os.killpg(0, signal.SIGKILL)   # the trainer and its sidecar
                os.kill(os.getpid(), signal.SIGKILL)
    return before


def run(scenario, rank):
    if scenario in ("shapes", "straggle-shapes"):
        # the sidecars' own check, below DDP (whose constructor refuses other parameter shapes
        # itself): rank 1 syncs a gradient of 5 elements where the others have 4
        n = 5 if rank == 1 else 4
        tool, args = ("hashsync", ["--scheme", "dense"]) if scenario == "shapes" else \
            ("straggle", ["--mode", "rna", "--dim", str(n)])
        t0 = time.monotonic()
        try:
            with start_sidecar(tool, args, timeout=TIMEOUT) as sc:
                seg = sc.client.segment(4096)
                seg.array(0, n)[:] = rank + 1
                sc.client.sync(0, [seg.tensor("w", 0, [n])]).result(2 * TIMEOUT)
        except Exception as e:  # noqa: B902 - what the test looks at
            return {"error": "%s: %s" % (type(e).__name__, e), "seconds": time.monotonic() - t0}
        return {"error": None}
    if scenario == "straggle-sidecar":
        m = net(0.001)
        state, hook = straggle_hook(m, mode="rna", timeout=TIMEOUT)
        m.register_comm_hook(state, hook)

        def before(s):
            if s == 2 and rank == 1:
                state.sidecar.proc.kill()
                state.sidecar.proc.wait()
        out = steps(m, rank, 5, before)
        out["replies"] = len(state.replies)
        state.close()
        return out
    if scenario in ("peer", "orphan"):
        m = net(0.001)
        state, hook = hashsync_hook("dense", timeout=TIMEOUT)
        m.register_comm_hook(state, hook)
        return steps(m, rank, 4, die_at(2, rank, 2, state, scenario == "peer"))
    if scenario == "straggle-peer":
        m = net(0.001)
        state, hook = straggle_hook(m, mode="allreduce", timeout=TIMEOUT)
        m.register_comm_hook(state, hook)
        return steps(m, rank, 4, die_at(2, rank, 2, state, True))
    raise SystemExit("unknown scenario %s" % scenario)


def main():
    out, scenarios = sys.argv[1], sys.argv[2:]
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    res = {}
    for sc in scenarios:
        res[sc] = run(sc, rank)
        with open(os.path.join(out, "r%d.json" % rank), "w") as f:
            json.dump(res, f)
        if sc in ("peer", "orphan", "straggle-peer"):
            break        # a rank is dead: no more collectives (torch's would fail too)
        dist.barrier()   # every rank's sidecar is gone before the next scenario's join the mesh
    sys.stdout.flush()
    os._exit(0)   # DDP's reducer after a failed backward: skip its teardown


if __name__ == "__main__":
    main()
