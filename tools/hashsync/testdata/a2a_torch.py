#!/usr/bin/python3
"""torch's all_to_all_single (gloo) on the inputs of `hashsync alltoall`, for the interop test.

    a2a_torch.py DIR WORLD...

For every WORLD, WORLD processes (forked) join a gloo group; rank r reads DIR/in.WORLD.r.tw (pairs
of frames: "<name>.splits", i64 [world], then "<name>", the rows), and for each pair runs torch's
two alltoalls, the split sizes then the rows
    dist.all_to_all_single(out_splits, in_splits)
    dist.all_to_all_single(out, rows, output_split_sizes=out_splits, input_split_sizes=in_splits)
and writes the same two frames to DIR/torch.WORLD.r.tw. Exit 0 when every rank did.
"""
import os
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from trainwire import wire


def rank_main(rank, world, d, store):
    dist.init_process_group("gloo", init_method="file://" + store, rank=rank, world_size=world)
    with open(os.path.join(d, f"in.{world}.{rank}.tw"), "rb") as f:
        frames = list(wire.Reader(f))
    out = []
    for sp, rows in zip(frames[0::2], frames[1::2]):
        in_splits = torch.from_numpy(wire.to_numpy(sp).copy())
        out_splits = torch.empty_like(in_splits)
        dist.all_to_all_single(out_splits, in_splits)
        x = torch.from_numpy(wire.to_numpy(rows).copy())
        y = x.new_empty((int(out_splits.sum()),) + tuple(x.shape[1:]))
        dist.all_to_all_single(y, x, output_split_sizes=out_splits.tolist(), input_split_sizes=in_splits.tolist())
        out.append(wire.dense(sp["name"], out_splits.numpy()))
        out.append(wire.dense(rows["name"], y.numpy()))
    with open(os.path.join(d, f"torch.{world}.{rank}.tw"), "wb") as f:
        w = wire.Writer(f, producer="a2a_torch.py")
        for fr in out:
            w.write(fr)
        w.close()
    dist.destroy_process_group()


def main():
    d, worlds = sys.argv[1], [int(w) for w in sys.argv[2:]]
    ctx = mp.get_context("fork")
    for world in worlds:
        store = tempfile.mktemp(prefix="a2a-store-", dir=d)
        procs = [ctx.Process(target=rank_main, args=(r, world, d, store)) for r in range(world)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
            if p.exitcode != 0:
                print(f"world {world}: a rank exited with {p.exitcode}", file=sys.stderr)
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
