"""Model-parallel embedding tables for DLRM-style training (docs/sven.md): each table lives whole on
one rank, every rank looks up the tables it holds for the whole global batch, and the lookups move
with alltoalls through this rank's `hashsync alltoall` process (Sven's asynchronous alltoall over
trainwire's mesh):

  forward   1. lengths: each sample's bag length for each table, to the table's rank
            2. indices: the bags themselves, to the table's rank (the chapter's input
               redistribution: two alltoalls, lengths then indices)
            3. pooled lookups: each owner's EmbeddingBag sums, back to the samples' ranks
  backward  4. the gradients of the pooled lookups, to the tables' ranks

The local tables are ordinary torch.nn.EmbeddingBag modules (parameters of this module, so any
optimizer steps them); they are not data parallel, so do not wrap this module in DDP.
"""

import concurrent.futures
import subprocess

import numpy as np
import torch

from trainwire import wire
from trainwire.serve import Sidecar, find_binary

__all__ = ["AllToAll", "SidecarAllToAll", "ShardedEmbeddingBagCollection", "owners_from_plan", "round_robin",
           "shards_from_plan"]


class AllToAll:
    """This rank's `hashsync alltoall` filter: `a2a(name, splits, rows)` sends rows[sum(splits[:k]) :
    ...+splits[k]] to rank k and returns (received splits, received rows), in rank order: what
    torch's all_to_all_single computes (1-D rows here)."""

    def __init__(self, rank, world, master, mode="async", args=(), env=None):
        cmd = [find_binary("hashsync"), "alltoall", "--rank", str(rank), "--world", str(world),
               "--master", master, "--mode", mode] + list(args)
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._w = wire.Writer(self.proc.stdin, producer="trainwire.embedding")
        self._r = iter(wire.Reader(self.proc.stdout))

    def __call__(self, name, splits, rows):
        self._w.write(wire.dense(name + ".splits", np.asarray(splits, dtype=np.int64)))
        self._w.write(wire.dense(name, np.ascontiguousarray(rows)))
        self.proc.stdin.flush()
        try:
            sp, data = next(self._r), next(self._r)
        except (StopIteration, wire.WireError) as e:
            code = self.proc.wait()
            raise RuntimeError("trainwire: hashsync alltoall %r failed (exit %s): %s" % (name, code, e)) from e
        return wire.to_numpy(sp).copy(), wire.to_numpy(data).copy()

    def close(self):
        """Ends the stream and waits for the process; raises if it failed."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self._w.close()
            self.proc.stdin.close()
        code = self.proc.wait()
        if code != 0:
            raise RuntimeError("trainwire: hashsync alltoall exited %d" % code)


_DTYPES = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64", np.dtype(np.float64): "f64",
           np.dtype(np.int32): "i32"}


class SidecarAllToAll:
    """This rank's `hashsync serve` sidecar answering alltoall requests (docs/serve.md): submit()
    returns a Future at once, so the alltoall runs in the sidecar while this process computes; the
    sidecar runs them one at a time in submission order (every rank must submit the same sequence).
    `a2a(name, splits, rows)` waits. A dead peer fails the futures with a SidecarError naming it."""

    def __init__(self, sidecar):
        self.sidecar, self.client, self.step = sidecar, sidecar.client, 0

    @classmethod
    def start(cls, rank, world, master, args=(), env=None):
        return cls(Sidecar.start("hashsync", ["--scheme", "dense"] + list(args), rank=rank, world=world,
                                 master=master, env=env))

    def submit(self, name, splits, rows):
        rows = np.ascontiguousarray(rows)
        splits = np.asarray(splits, dtype=np.int64)
        dt = _DTYPES.get(rows.dtype)
        if dt is None:
            raise ValueError("trainwire: alltoall %r: dtype %s" % (name, rows.dtype))
        req = {"op": "alltoall", "step": self.step, "opts": {"average": False}, "tensors": [
            {"name": name + ".splits", "dtype": "i64", "shape": [len(splits)], "data": splits.tobytes()},
            {"name": name, "dtype": dt, "shape": list(rows.shape), "data": rows.tobytes()}]}
        self.step += 1
        f = self.client.submit(req)
        out = concurrent.futures.Future()

        def done(f):
            try:
                rep = self.client.check(f.result())
                out.set_result((np.frombuffer(rep["data"][0], np.int64).copy(),
                                np.frombuffer(rep["data"][1], rows.dtype).copy()))
            except BaseException as e:  # noqa: B902 - handed to the waiter
                out.set_exception(e)
        f.add_done_callback(done)
        return out

    def __call__(self, name, splits, rows):
        return self.submit(name, splits, rows).result()

    def close(self):
        self.sidecar.close()


def _done(value):
    f = concurrent.futures.Future()
    f.set_result(value)
    return f


def round_robin(n_tables, world):
    """Table t on rank t mod world."""
    return [t % world for t in range(n_tables)]


def owners_from_plan(plan, names):
    """The rank of each table in `names` from a `hashsync place` plan frame (kind "embedding").
    Tables cut row-wise are refused: this collection holds tables whole."""
    if plan.get("kind") != "embedding":
        raise ValueError("trainwire: plan of kind %r, want 'embedding'" % plan.get("kind"))
    owner = {}
    for it in plan["items"]:
        if it["table"] in owner:
            raise ValueError("trainwire: table %r is cut row-wise in the plan; place it whole "
                             "(hashsync place --algo size-greedy, or fewer ranks)" % it["table"])
        owner[it["table"]] = int(it["rank"])
    missing = [n for n in names if n not in owner]
    if missing:
        raise ValueError("trainwire: the plan places no table named %s" % ", ".join(map(repr, missing)))
    return [owner[n] for n in names]


def shards_from_plan(plan, tables):
    """The shards (table index, row_lo, row_hi, rank) of `tables` ((name, rows, dim) each) in a
    `hashsync place` plan frame (kind "embedding"), tables cut row-wise included; every table's
    ranges must cover its rows exactly."""
    if plan.get("kind") != "embedding":
        raise ValueError("trainwire: plan of kind %r, want 'embedding'" % plan.get("kind"))
    index = {t[0]: i for i, t in enumerate(tables)}
    shards = []
    for it in plan["items"]:
        if it["table"] not in index:
            raise ValueError("trainwire: the plan places table %r, not one of the model's" % it["table"])
        shards.append((index[it["table"]], int(it["row_lo"]), int(it["row_hi"]), int(it["rank"])))
    shards.sort()
    for i, (name, rows, _) in enumerate(tables):
        got = [(lo, hi) for t, lo, hi, _ in shards if t == i]
        at = 0
        for lo, hi in got:
            if lo != at or hi <= lo:
                break
            at = hi
        if not got or at != rows:
            raise ValueError("trainwire: the plan's ranges of table %r are %r, not [0, %d) exactly" % (name, got, rows))
    return shards


class _Pooled(torch.autograd.Function):
    """Alltoall 3 in forward (owners' pooled lookups to the samples' ranks), 4 in backward."""

    @staticmethod
    def forward(ctx, local, coll, rows_from):
        ctx.coll, ctx.rows_from = coll, rows_from
        return coll._exchange_pooled(local.detach(), rows_from)

    @staticmethod
    def backward(ctx, grad):
        return ctx.coll._exchange_grads(grad.contiguous(), ctx.rows_from), None, None


class ShardedEmbeddingBagCollection(torch.nn.Module):
    """Tables (name, rows, dim) held whole by rank owner[t], or cut into row ranges (shards: (table
    index, row_lo, row_hi, rank), e.g. from shards_from_plan); forward(lengths, indices) returns
    every local sample's pooled (sum) lookups, [batch, sum of dims], tables in order. A table cut
    row-wise is looked up by every rank holding a range of it, on the indices in its range; the
    partial sums come back and are added in rank order.

    lengths: int64 [batch, tables], the bag length of each sample for each table; indices: int64,
    the bags one after the other, sample by sample, tables in order within a sample. Table t's
    weights start from torch.manual_seed(seed + t), the same on every rank (so a single process can
    rebuild the whole model for reference)."""

    def __init__(self, tables, rank, world, alltoall, owner=None, seed=0, shards=None):
        super().__init__()
        self.tables, self.rank, self.world, self.a2a = list(tables), rank, world, alltoall
        if shards is None:
            owner = list(owner) if owner is not None else round_robin(len(self.tables), world)
            if len(owner) != len(self.tables):
                raise ValueError("trainwire: owners %r for %d tables" % (owner, len(self.tables)))
            shards = [(t, 0, self.tables[t][1], o) for t, o in enumerate(owner)]
        self.shards = sorted(tuple(int(v) for v in sh) for sh in shards)
        if any(not 0 <= sh[3] < world for sh in self.shards):
            raise ValueError("trainwire: shards %r on %d ranks" % (self.shards, world))
        self.local = [i for i, sh in enumerate(self.shards) if sh[3] == rank]
        self.bags = torch.nn.ModuleDict({self._key(i): make_bag(self.tables[self.shards[i][0]], seed + self.shards[i][0],
                                                                self.shards[i][1], self.shards[i][2]) for i in self.local})
        self.of_rank = [[i for i, sh in enumerate(self.shards) if sh[3] == k] for k in range(world)]
        self.dim_of = [sum(self._dim(i) for i in ss) for ss in self.of_rank]

    def _dim(self, i):
        return self.tables[self.shards[i][0]][2]

    def _key(self, i):
        """The bag of shard i: the table's name when whole, name@row_lo when cut."""
        t, lo, hi, _ = self.shards[i]
        name = self.tables[t][0]
        return name if (lo, hi) == (0, self.tables[t][1]) else "%s@%d" % (name, lo)

    def _bags_of(self, ss, lengths, indices, starts, ends):
        """Rank's part of the redistribution: per sample, per shard in ss, its bag's indices in the
        shard's range (relative to it) and their count."""
        nt, batch = len(self.tables), lengths.shape[0]
        lens, parts = np.zeros((batch, len(ss)), np.int64), []
        for b in range(batch):
            for j, i in enumerate(ss):
                t, lo, hi, _ = self.shards[i]
                bag = indices[starts[b * nt + t]:ends[b * nt + t]]
                if (lo, hi) != (0, self.tables[t][1]):
                    bag = bag[(bag >= lo) & (bag < hi)] - lo
                lens[b, j] = len(bag)
                parts.append(bag)
        return lens.reshape(-1), (np.concatenate(parts) if parts else np.zeros(0, np.int64))

    def forward(self, lengths, indices):
        lengths = np.asarray(lengths, dtype=np.int64)
        batch = lengths.shape[0]
        rows_from, idx_by_src = self.finish_redistribute(self.submit_redistribute(lengths, indices))
        local = self._lookup(self.bag_inputs(rows_from, idx_by_src))
        out = _Pooled.apply(local, self, rows_from)
        return out.view(batch, -1)

    # -- the steps of one mini-batch, each alltoall a Future (docs/sven.md, the pipeline)
    def _a2a(self, name, splits, rows):
        """Future of one alltoall: submitted to the sidecar (SidecarAllToAll), or run at once.
        With wait_each the Future is complete on return (the sequential schedule)."""
        if hasattr(self.a2a, "submit"):
            f = self.a2a.submit(name, splits, rows)
            if getattr(self, "wait_each", False):
                f.result()
            return f
        return _done(self.a2a(name, splits, rows))

    def submit_redistribute(self, lengths, indices):
        """Alltoalls 1 and 2: each owner gets the lengths, then the indices, of its tables."""
        lengths = np.asarray(lengths, dtype=np.int64)
        indices = np.asarray(indices, dtype=np.int64)
        ends = np.cumsum(lengths.reshape(-1))
        starts = ends - lengths.reshape(-1)
        send_len, send_idx = [], []
        for ss in self.of_rank:
            ls, ix = self._bags_of(ss, lengths, indices, starts, ends)
            send_len.append(ls)
            send_idx.append(ix)
        return (self._a2a("lengths", [len(x) for x in send_len], np.concatenate(send_len)),
                self._a2a("indices", [len(x) for x in send_idx], np.concatenate(send_idx)))

    def finish_redistribute(self, futs):
        """(rows from each rank, [(its lengths, its indices)]) of submit_redistribute's alltoalls."""
        (got, recv_len), (got_idx, recv_idx) = futs[0].result(), futs[1].result()
        mine = len(self.local)
        rows_from, by_src, lo, ilo = [], [], 0, 0
        for k in range(self.world):
            n = int(got[k])
            ls = recv_len[lo:lo + n].reshape(-1, mine) if mine else np.zeros((0, 0), np.int64)
            rows_from.append(ls.shape[0] if mine else 0)
            m = int(got_idx[k])
            by_src.append((ls, recv_idx[ilo:ilo + m]))
            lo, ilo = lo + n, ilo + m
        return rows_from, by_src

    def bag_inputs(self, rows_from, by_src):
        """Per local table, the (indices, offsets) of every sample of every rank, rank order."""
        if not self.local:
            return []
        all_len = np.concatenate([ls for ls, _ in by_src]) if by_src else np.zeros((0, len(self.local)), np.int64)
        all_idx = np.concatenate([ix for _, ix in by_src])
        # indices are sample-major, local table-minor: cut them per table
        flat = all_len.reshape(-1)
        ends = np.cumsum(flat)
        starts = ends - flat
        out = []
        for j in range(len(self.local)):
            sel = np.arange(j, len(flat), len(self.local))
            idx = np.concatenate([all_idx[starts[s]:ends[s]] for s in sel]) if len(sel) else np.zeros(0, np.int64)
            offsets = np.concatenate([[0], np.cumsum(flat[sel])[:-1]]) if len(sel) else np.zeros(0, np.int64)
            out.append((torch.from_numpy(idx), torch.from_numpy(offsets.astype(np.int64))))
        return out

    def _lookup(self, inputs):
        """The local tables' pooled sums for every sample of every rank: [sum rows_from, local dims]."""
        if not self.local:
            return torch.zeros((0, 0), requires_grad=True)
        return torch.cat([self.bags[self._key(i)](*inputs[j]) for j, i in enumerate(self.local)], dim=1)

    def lookup(self, inputs):
        """The pooled sums of bag_inputs, without autograd (the pipeline's sparse forward)."""
        with torch.no_grad():
            return self._lookup(inputs)

    def submit_pooled(self, local, rows_from):
        """Alltoall 3: rows of `local` to the ranks whose samples they are; columns in table order."""
        d = local.shape[1] if self.local else 0
        splits = [r * d for r in rows_from]
        return self._a2a("pooled", splits, local.numpy().reshape(-1).astype(np.float32))

    def _exchange_pooled(self, local, rows_from):
        return self.assemble(self.submit_pooled(local, rows_from))

    def assemble(self, fut):
        """The pooled lookups of this rank's samples, [batch, sum of dims], from alltoall 3."""
        got, data = fut.result()
        parts, lo = {}, 0
        for k in range(self.world):
            n = int(got[k])
            block = data[lo:lo + n].reshape(-1, self.dim_of[k]) if self.dim_of[k] else None
            lo += n
            c = 0
            for i in self.of_rank[k]:
                t, d = self.shards[i][0], self._dim(i)
                parts[t] = block[:, c:c + d] if t not in parts else parts[t] + block[:, c:c + d]
                c += d
        return torch.from_numpy(np.ascontiguousarray(np.concatenate([parts[t] for t in range(len(self.tables))], axis=1)))

    def submit_grads(self, grad, rows_from):
        """Alltoall 4: each owner gets the gradients of the columns of its tables."""
        col, starts = 0, {}
        for t, (_, _, dim) in enumerate(self.tables):
            starts[t] = col
            col += dim
        g = grad.numpy()
        send = [np.concatenate([g[:, starts[t]:starts[t] + self.tables[t][2]] for t in (self.shards[i][0] for i in ss)],
                               axis=1).reshape(-1) if ss else np.zeros(0, np.float32) for ss in self.of_rank]
        return self._a2a("grads", [len(x) for x in send], np.concatenate(send).astype(np.float32))

    def finish_grads(self, fut):
        """The gradients of the local pooled lookups, [sum rows_from, local dims]."""
        _, data = fut.result()
        if not self.local:
            return torch.zeros((0, 0))
        return torch.from_numpy(data.reshape(-1, self.dim_of[self.rank]).copy())

    def _exchange_grads(self, grad, rows_from):
        return self.finish_grads(self.submit_grads(grad, rows_from))

    def sparse_step(self, inputs, grad, lr):
        """Sparse backward and SGD on the local tables: each looked-up row minus lr times the sum
        of its bags' gradients (the gradient of a sum bag does not depend on the weights, so
        inputs stashed at lookup time give the same update whatever version was looked up)."""
        c = 0
        for j, i in enumerate(self.local):
            dim = self._dim(i)
            idx, off = inputs[j]
            counts = torch.diff(torch.cat([off, torch.tensor([len(idx)])]))
            rows = grad[:, c:c + dim].repeat_interleave(counts, dim=0)
            w = self.bags[self._key(i)].weight
            with torch.no_grad():
                w.index_add_(0, idx, rows, alpha=-lr)
            c += dim


def make_bag(table, seed, lo=0, hi=None):
    """Rows [lo, hi) of table (name, rows, dim) as a sum EmbeddingBag, the table's weights drawn
    whole from torch.manual_seed(seed) (so every cut of a table holds the same values)."""
    _, rows, dim = table
    hi = rows if hi is None else hi
    g = torch.Generator().manual_seed(seed)
    bag = torch.nn.EmbeddingBag(hi - lo, dim, mode="sum")
    with torch.no_grad():
        bag.weight.copy_((torch.randn(rows, dim, generator=g) * 0.1)[lo:hi])
    return bag
