#!/usr/bin/python3
"""One rank of the interference benchmark (bench/ckpt/interfere.sh): a synthetic training loop —
compute A, a gloo allreduce of G bytes, compute B — that checkpoints its state every iteration
through the local ckpt agent, in one of the modes:

  none        no checkpoint (the baseline)
  blocking    save, then wait for the global commit before training on (checkpoint traffic alone)
  async       save and go on; the agent replicates at once, competing with the allreduce
  nopipe      save and go on; the agent interleaves into the idle spans with p = 1 (no pipelining)
  interleave  save and go on; the agent interleaves into the idle spans with p = 4 (Gemini)

Prints one JSON line: mean iteration and allreduce times over the measured iterations.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from trainwire.ckpt import Agent  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--master", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--mode", required=True)
    ap.add_argument("--grad", type=int, default=4 << 20)
    ap.add_argument("--state", type=int, default=14 << 20)
    ap.add_argument("--a", type=float, default=0.4)
    ap.add_argument("--b", type=float, default=0.4)
    ap.add_argument("--warm", type=int, default=6)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--live", type=int, default=1, help="report comm ops to the agent as they happen (0: only the spans in the ticks)")
    o = ap.parse_args()
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://" + o.master, rank=o.rank, world_size=o.world)
    grad = torch.ones(o.grad // 4)
    state = np.random.default_rng(o.rank).random(o.state // 8)
    agent = Agent(o.socket) if o.mode != "none" else None
    iters, ars, stalls, windows = [], [], [], []
    comm = []
    for it in range(o.warm + o.iters):
        t0 = time.perf_counter()
        if agent:
            agent.tick(it, comm)
        time.sleep(o.a)
        live = agent is not None and o.mode in ("nopipe", "interleave") and o.live
        if live:
            agent.comm_begin()
        a0, w0 = time.perf_counter(), time.time_ns()
        dist.all_reduce(grad)
        a1, w1 = time.perf_counter(), time.time_ns()
        if live:
            agent.comm_end()
        time.sleep(o.b)
        # The optimizer step is done: checkpoint this iteration's state (Gemini checkpoints at
        # the end of an iteration; its traffic goes into the next iteration's idle spans).
        stall = 0.0
        if agent and it >= o.warm - 1:
            s0 = time.perf_counter()
            agent.save_shm(it + 1, [state])
            if o.mode == "blocking":
                agent.wait(it + 1)
            stall = time.perf_counter() - s0
        t1 = time.perf_counter()
        comm = [(a0 - t0, a1 - t0)]
        if it >= o.warm:
            iters.append(t1 - t0)
            ars.append(a1 - a0)
            stalls.append(stall)
            windows.append((it, w0, w1))
    if agent:
        agent.wait(o.warm + o.iters)
    dist.barrier()
    print(json.dumps({"mode": o.mode, "rank": o.rank, "iter_s": statistics.mean(iters),
                      "allreduce_s": statistics.mean(ars), "stall_s": statistics.mean(stalls),
                      "iters": len(iters), "windows": windows, "grad": o.grad, "state": o.state, "a": o.a, "b": o.b}), flush=True)


if __name__ == "__main__":
    main()
