#!/usr/bin/python3
"""DLRM-style training with model-parallel embeddings through Sven's asynchronous alltoall
(docs/sven.md): 8 embedding tables held whole by the ranks (round-robin, or a `hashsync place`
plan), looked up with trainwire.embedding.ShardedEmbeddingBagCollection (alltoalls of lengths,
indices, pooled lookups and their gradients through this rank's `hashsync alltoall`), a bottom MLP
on 13 dense features and a top MLP, data parallel (gloo all_reduce of the dense gradients).

    torchrun --nproc_per_node 4 examples/dlrm.py --steps 50 [--check] [--plan plan.tw] [--mode async]

The data are synthetic: Zipf-distributed bag indices and clicks from a fixed random teacher, so the
loss falls. Rank 0 prints a JSON line per step (step, loss averaged over the ranks, seconds) and a
summary. --check compares, at the first step, the sharded lookups with a single process's on the
same weights (every table starts from torch.manual_seed(seed + t) on every rank): equal, bit for bit.
Needs the hashsync binary ($TRAINWIRE_BIN or PATH); its mesh listens on MASTER_PORT+2.
"""

import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist

from trainwire import wire
from trainwire.embedding import AllToAll, ShardedEmbeddingBagCollection, make_bag, owners_from_plan

TABLES = [("t%d" % i, r, 16) for i, r in enumerate([4000, 1000, 8000, 500, 2000, 3000, 6000, 1500])]
DENSE, BATCH, BAG = 13, 64, 4


def batch(step, rank, rng_teacher):
    """Rank's mini-batch of step: dense features, bag lengths and indices, clicks."""
    g = np.random.default_rng(1000 * step + rank)
    x = g.standard_normal((BATCH, DENSE)).astype(np.float32)
    lengths = g.integers(1, BAG + 1, size=(BATCH, len(TABLES)))
    idx = []
    for b in range(BATCH):
        for t, (_, rows, _) in enumerate(TABLES):
            idx.append(np.minimum(g.zipf(1.2, size=lengths[b, t]) - 1, rows - 1))
    indices = np.concatenate(idx).astype(np.int64)
    w = rng_teacher
    score = x @ w[:DENSE] + np.array([w[DENSE + t] * np.log1p(indices[:1]).sum() for t in range(1)])
    y = (score + 0.1 * g.standard_normal(BATCH) > 0).astype(np.float32)
    return torch.from_numpy(x), lengths, indices, torch.from_numpy(y)


class DLRM(torch.nn.Module):
    def __init__(self, emb):
        super().__init__()
        self.emb = emb
        self.bottom = torch.nn.Sequential(torch.nn.Linear(DENSE, 16), torch.nn.ReLU())
        self.top = torch.nn.Sequential(torch.nn.Linear(16 * (len(TABLES) + 1), 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))

    def forward(self, x, lengths, indices):
        return self.top(torch.cat([self.bottom(x), self.emb(lengths, indices)], dim=1)).squeeze(1)


def check(emb, lengths, indices, seed):
    """The sharded lookups equal a single process's on the same weights."""
    got = emb(lengths, indices).detach()
    bags = [make_bag(t, seed + i) for i, t in enumerate(TABLES)]
    flat = lengths.reshape(-1)
    ends = np.cumsum(flat)
    starts = ends - flat
    cols = []
    for t, bag in enumerate(bags):
        sel = np.arange(t, len(flat), len(TABLES))
        idx = np.concatenate([indices[starts[s]:ends[s]] for s in sel])
        off = np.concatenate([[0], np.cumsum(flat[sel])[:-1]])
        cols.append(bag(torch.from_numpy(idx), torch.from_numpy(off.astype(np.int64))).detach())
    want = torch.cat(cols, dim=1)
    if not torch.equal(got, want):
        raise SystemExit("dlrm: --check: sharded lookups differ from the single-process ones by %g"
                         % (got - want).abs().max().item())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", choices=["async", "sync", "scatter"], default="async", help="hashsync alltoall --mode")
    p.add_argument("--plan", help="a `hashsync place` plan stream (tables t0..t7, placed whole)")
    p.add_argument("--check", action="store_true", help="compare the first step's lookups with one process's")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    master = "%s:%d" % (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "29500")) + 2)
    owner = None
    if a.plan:
        with open(a.plan, "rb") as f:
            plan = next(fr for fr in wire.Reader(f) if fr["t"] == "plan")
        owner = owners_from_plan(plan, [t[0] for t in TABLES])
    a2a = AllToAll(rank, world, master, mode=a.mode)
    torch.manual_seed(a.seed)
    emb = ShardedEmbeddingBagCollection(TABLES, rank, world, a2a, owner=owner, seed=a.seed)
    model = DLRM(emb)
    dense = [p_ for n, p_ in model.named_parameters() if not n.startswith("emb.")]
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    teacher = np.random.default_rng(42).standard_normal(DENSE + 1).astype(np.float32)
    first = last = None
    t_start = time.time()
    for step in range(a.steps):
        t0 = time.time()
        x, lengths, indices, y = batch(step, rank, teacher)
        if a.check and step == 0:
            check(emb, lengths, indices, a.seed)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(model(x, lengths, indices), y)
        opt.zero_grad()
        loss.backward()
        for q in dense:  # data parallel: the mean of the dense gradients
            dist.all_reduce(q.grad)
            q.grad /= world
        opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt)
        mean = lt.item() / world
        first = mean if first is None else first
        last = mean
        if rank == 0:
            print(json.dumps({"step": step, "loss": round(mean, 6), "seconds": round(time.time() - t0, 4)}), flush=True)
    a2a.close()
    if rank == 0:
        print(json.dumps({"summary": True, "steps": a.steps, "first_loss": first, "last_loss": last,
                          "seconds": round(time.time() - t_start, 3), "world": world, "mode": a.mode}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
