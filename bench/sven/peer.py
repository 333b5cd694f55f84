#!/usr/bin/python3
"""bench/sven/peer.py — the data and the torch peer of bench/sven/run.sh.

    peer.py gen --rank R --world N --batch B --width D          > in.tw
    peer.py torch --rank R --world N --master HOST:PORT --repeat K [--late-rank L --late-by S] < in.tw

gen writes rank R's forward alltoall of a DLRM step: its pooled lookups for every rank's B samples
(width D: the tables it holds times their dimension), as hashsync alltoall reads them: "lookups.splits"
(i64, B rows to each rank) then "lookups" ([N*B, D] f32).

torch runs the same alltoall K times with torch.distributed (gloo): all_to_all_single of the
split sizes, then of the rows, each run after a barrier, rank L sleeping S seconds first (a rank
arriving late); it prints one JSON line per run: {"impl": "torch-gloo", "rank", "run", "ns"}, the
time from this rank's arrival to the end of its alltoall.
"""
import argparse
import json
import sys
import time

import numpy as np

from trainwire import wire


def gen(a):
    rng = np.random.default_rng(a.rank)
    w = wire.Writer(sys.stdout.buffer, producer="bench/sven/peer.py")
    w.write(wire.dense("lookups.splits", np.full(a.world, a.batch, dtype=np.int64)))
    w.write(wire.dense("lookups", rng.standard_normal((a.world * a.batch, a.width), dtype=np.float32)))
    w.close()


def run_torch(a):
    import torch
    import torch.distributed as dist
    host, port = a.master.rsplit(":", 1)
    dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=a.rank, world_size=a.world)
    frames = list(wire.Reader(sys.stdin.buffer))
    splits = torch.from_numpy(wire.to_numpy(frames[0]).copy())
    x = torch.from_numpy(wire.to_numpy(frames[1]).copy())
    for run in range(a.repeat):
        dist.barrier()
        if a.rank == a.late_rank:
            time.sleep(a.late_by)
        t0 = time.perf_counter_ns()
        out_splits = torch.empty_like(splits)
        dist.all_to_all_single(out_splits, splits)
        y = x.new_empty((int(out_splits.sum()),) + tuple(x.shape[1:]))
        dist.all_to_all_single(y, x, output_split_sizes=out_splits.tolist(), input_split_sizes=splits.tolist())
        ns = time.perf_counter_ns() - t0
        print(json.dumps({"impl": "torch-gloo", "rank": a.rank, "run": run, "ns": ns}), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["gen", "torch"])
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world", type=int, required=True)
    p.add_argument("--batch", type=int, default=512)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--master", default="127.0.0.1:29500")
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--late-rank", type=int, default=-1)
    p.add_argument("--late-by", type=float, default=0.0)
    a = p.parse_args()
    gen(a) if a.cmd == "gen" else run_torch(a)


if __name__ == "__main__":
    main()
