#!/usr/bin/python3
"""DLRM-style training with model-parallel embeddings through Sven's asynchronous alltoall
(docs/sven.md): 8 embedding tables held by the ranks, whole or cut row-wise (round-robin, or a `hashsync place`
plan), looked up with trainwire.embedding.ShardedEmbeddingBagCollection (alltoalls of lengths,
indices, pooled lookups and their gradients through this rank's `hashsync alltoall`), a bottom MLP
on 13 dense features and a top MLP, data parallel (gloo all_reduce of the dense gradients).

    torchrun --nproc_per_node 4 examples/dlrm.py --steps 50 [--check] [--plan plan.tw] [--mode async]
    torchrun --nproc_per_node 4 examples/dlrm.py --schedule pipe --staleness 3   # Sven's pipeline

--schedule plain (default) trains step by step through autograd, the alltoalls through this rank's
`hashsync alltoall` filter (--transport filter), its `hashsync serve` sidecar (sidecar) or torch's
gloo all_to_all_single (torch). --schedule seq|pipe trains under bounded staleness: mini-batch t's
embeddings are looked up against the tables as they were after max(0, t - S) updates
(--staleness S, at most 3), the dense part is always current. pipe keeps the alltoalls in flight in
the sidecar while this process computes (the redistribution of t+S+1 and the lookups of t+S during
the dense forward/backward of t; the gradient alltoall of t during the dense allreduce); seq runs
the very same operations in the same order, waiting for each alltoall as it is submitted. Both
give the same parameters bit for bit (--dump DIR writes them, rank by rank).

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
from trainwire.embedding import AllToAll, ShardedEmbeddingBagCollection, SidecarAllToAll, make_bag, shards_from_plan
from trainwire.pipeline import Pipeline, StageTimer

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
    cut = len(emb.shards) > len(TABLES)  # partial sums of row ranges: another order of additions
    if not (torch.allclose(got, want, rtol=1e-6, atol=1e-6) if cut else torch.equal(got, want)):
        raise SystemExit("dlrm: --check: sharded lookups differ from the single-process ones by %g"
                         % (got - want).abs().max().item())


class TorchAllToAll:
    """Plain torch model parallelism's exchange: all_to_all_single of the split sizes, then of the
    rows (gloo), the baseline of the benchmark."""

    def __init__(self, world):
        self.world = world

    def __call__(self, name, splits, rows):
        sp = torch.tensor(np.asarray(splits, np.int64))
        got = torch.empty_like(sp)
        dist.all_to_all_single(got, sp)
        t = torch.from_numpy(np.ascontiguousarray(rows))
        out = torch.empty(int(got.sum()), dtype=t.dtype)
        dist.all_to_all_single(out, t, got.tolist(), sp.tolist())
        return got.numpy(), out.numpy()

    def close(self):
        pass


class Staleness:
    """The stages of a DLRM step under Sven's schedule, run by trainwire.pipeline.Pipeline: mini-batch
    u's lookups read the tables after max(0, u - S) updates. Each mini-batch's state between its
    lookup and its update is stashed (the chapter's queues); at most S+1 are in flight."""

    def __init__(self, model, emb, dense, world, data, lr, s, pipelined, steps):
        self.model, self.emb, self.dense, self.world, self.data, self.lr = model, emb, dense, world, data, lr
        emb.wait_each = not pipelined
        self.opt = torch.optim.SGD(dense, lr=lr)
        self.red, self.stash = {}, {}
        self.clock = StageTimer()
        self.timed = self.clock.timed
        self.pipe = Pipeline(self.prepare, self.train, steps, s)
        self.steps = steps

    def prepare(self, u):
        """Sparse forward of u: its redistribution's result, the next one submitted, the lookups
        against the current tables, and alltoall 3 submitted."""
        x, lengths, indices, y = self.data(u)
        if u == 0:
            self.red[0] = self.timed("all2all", self.emb.submit_redistribute, lengths, indices)
        rows_from, by_src = self.timed("all2all", self.emb.finish_redistribute, self.red.pop(u))
        if u + 1 < self.steps:
            _, l1, i1, _ = self.data(u + 1)
            self.red[u + 1] = self.timed("all2all", self.emb.submit_redistribute, l1, i1)
        inputs = self.timed("SFP", self.emb.bag_inputs, rows_from, by_src)
        local = self.timed("SFP", self.emb.lookup, inputs)
        fut = self.timed("fall2all", self.emb.submit_pooled, local, rows_from)
        self.stash[u] = (x, y, rows_from, inputs, fut)

    def train(self, t):
        """Dense forward/backward of t, alltoall 4 and the dense allreduce, then the updates."""
        x, y, rows_from, inputs, fut = self.stash.pop(t)
        pooled = self.timed("fall2all", self.emb.assemble, fut).requires_grad_()
        loss = self.timed("FP", self.forward, x, pooled, y)
        self.opt.zero_grad()
        self.timed("BP", loss.backward)
        gfut = self.timed("ball2all", self.emb.submit_grads, pooled.grad, rows_from)
        self.timed("allreduce", self.allreduce)
        grad = self.timed("ball2all", self.emb.finish_grads, gfut)
        self.timed("SBP", self.emb.sparse_step, inputs, grad, self.lr)
        self.timed("opt", self.opt.step)
        return loss.detach()

    def forward(self, x, pooled, y):
        z = torch.cat([self.model.bottom(x), pooled], dim=1)
        return torch.nn.functional.binary_cross_entropy_with_logits(self.model.top(z).squeeze(1), y)

    def allreduce(self):
        handles = [dist.all_reduce(q.grad, async_op=True) for q in self.dense]
        for h in handles:
            h.wait()
        for q in self.dense:
            q.grad /= self.world



def dump(model, rank, where):
    os.makedirs(where, exist_ok=True)
    np.savez(os.path.join(where, "rank%d.npz" % rank), **{n: p.detach().numpy() for n, p in model.named_parameters()})


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mode", choices=["async", "sync", "scatter"], default="async", help="hashsync alltoall --mode")
    p.add_argument("--transport", choices=["filter", "sidecar", "torch"], default="filter",
                   help="the alltoalls: hashsync alltoall, hashsync serve, or torch all_to_all_single (plain only)")
    p.add_argument("--schedule", choices=["plain", "seq", "pipe"], default="plain",
                   help="plain: step by step; seq/pipe: bounded staleness, sequential or pipelined (sidecar)")
    p.add_argument("--staleness", type=int, default=3, help="S of --schedule seq|pipe (0 to 3)")
    p.add_argument("--sidecar-args", default="", help="more `hashsync serve` flags (--bind ADDR --no-unix)")
    p.add_argument("--dump", help="write every rank's parameters to DIR/rank<r>.npz at the end")
    p.add_argument("--plan", help="a `hashsync place` plan stream (tables t0..t7, whole or cut row-wise)")
    p.add_argument("--check", action="store_true", help="compare the first step's lookups with one process's")
    a = p.parse_args()
    if not 0 <= a.staleness <= 3:
        p.error("--staleness %d: Sven bounds it by 3" % a.staleness)
    if a.schedule != "plain" and a.transport != "sidecar":
        a.transport = "sidecar"
    return a


def transport(a, rank, world):
    master = "%s:%d" % (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", "29500")) + 2)
    if a.transport == "torch":
        return TorchAllToAll(world)
    if a.transport == "sidecar":
        return SidecarAllToAll.start(rank, world, master, args=a.sidecar_args.split())
    return AllToAll(rank, world, master, mode=a.mode)


def main():
    a = parse()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    shards = None
    if a.plan:
        with open(a.plan, "rb") as f:
            plan = next(fr for fr in wire.Reader(f) if fr["t"] == "plan")
        shards = shards_from_plan(plan, TABLES)
    a2a = transport(a, rank, world)
    emb = ShardedEmbeddingBagCollection(TABLES, rank, world, a2a, seed=a.seed, shards=shards)
    torch.manual_seed(a.seed)  # after the tables (whose sizes differ by rank): the same dense replicas
    model = DLRM(emb)
    dense = [p_ for n, p_ in model.named_parameters() if not n.startswith("emb.")]
    opt = torch.optim.SGD(model.parameters(), lr=a.lr)
    teacher = np.random.default_rng(42).standard_normal(DENSE + 1).astype(np.float32)
    sched = None
    if a.schedule != "plain":
        sched = Staleness(model, emb, dense, world, lambda u: batch(u, rank, teacher), a.lr, a.staleness,
                          a.schedule == "pipe", a.steps)
    first = last = None
    t_start = time.time()
    t_warm = None
    for step in range(a.steps):
        t0 = time.time()
        if step == 1:
            t_warm = t0
        if sched is not None:
            lt = sched.pipe.step(step)
        else:
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
    t_end = time.time()
    if a.dump:
        dump(model, rank, a.dump)
    a2a.close()
    if rank == 0:
        timed = a.steps - 1 if t_warm else 0
        print(json.dumps({"summary": True, "steps": a.steps, "first_loss": first, "last_loss": last,
                          "seconds": round(t_end - t_start, 3), "world": world, "mode": a.mode,
                          "transport": a.transport, "schedule": a.schedule,
                          "staleness": a.staleness if sched else 0,
                          "max_staleness": sched.pipe.max_staleness if sched else 0,
                          "stage_ms": {k: round(v, 3) for k, v in sched.clock.per_step_ms(a.steps).items()} if sched else None,
                          "samples_per_s": round(timed * BATCH * world / (t_end - t_warm), 1) if timed else None}),
              flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
