#!/usr/bin/python3
"""One rank of bench/ckpt: the save stall of torch.save (+ fsync) against ckpt's shared-memory
hand-over, the time to global commit (replication), and restore from memory against torch.load.

    bench.py --rank R --world W --socket S --dir D [--state 512MiB] [--iters 3] [--restore-peer]

Prints one JSON line per measurement on stdout.
"""

import argparse
import json
import mmap
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from trainwire.ckpt import Agent  # noqa: E402


def size(s):
    u = s.strip().upper()
    for suf, m in (("GIB", 1 << 30), ("MIB", 1 << 20), ("KIB", 1 << 10), ("GB", 10**9), ("MB", 10**6)):
        if u.endswith(suf):
            return int(float(u[:-len(suf)]) * m)
    return int(u)


def barrier(d, name, rank, world, timeout=600):
    open(os.path.join(d, "%s.%d" % (name, rank)), "w").close()
    t0 = time.time()
    while not all(os.path.exists(os.path.join(d, "%s.%d" % (name, r))) for r in range(world)):
        if time.time() - t0 > timeout:
            raise SystemExit("barrier %s timed out" % name)
        time.sleep(0.002)


def state_dict(total, rank, seed=0):
    g = torch.Generator().manual_seed(1000 * rank + seed)
    n = 16
    per = total // 4 // n
    return {"layer%d.weight" % i: torch.rand(per, generator=g) for i in range(n)}


def emit(**kw):
    print(json.dumps(kw), flush=True)


def state_copier(sd):
    """A streamed restore_shm callback that copies the shard's bytes into the state's tensors, in
    order, each as soon as it has arrived."""
    def copy_out(buf, ready):
        src = np.frombuffer(buf, dtype=np.uint8)
        off = 0
        for t in sd.values():
            n = t.numel() * 4
            ready(off + n)
            np.copyto(t.numpy().reshape(-1).view(np.uint8), src[off:off + n])
            off += n
        del src
    return copy_out


def load_fresh(a, path, tag):
    """torch.load of path in a new process, as a restarted trainer does it (its memory is not
    yet faulted in, and not recycled from an earlier load): the process starts and imports torch,
    waits at barrier tag with the other ranks', then loads. Returns the load's seconds."""
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--rank", str(a.rank), "--world", str(a.world),
                          "--socket", "-", "--dir", a.dir, "--torch-load", path, "--tag", tag],
                         check=True, capture_output=True, text=True)
    return float(out.stdout)


def copy_floor(a, sd, copy_out):
    """The least any restore from memory into the state's tensors costs on this host: the same
    bytes copied by the same callback out of a shared-memory file this process maps afresh, every
    rank at once, with no agent, no control message and no check. ITERS rounds; their seconds."""
    fd = os.memfd_create("ckpt-bench-floor")
    try:
        n = sum(t.numel() * 4 for t in sd.values())
        os.ftruncate(fd, n)
        with mmap.mmap(fd, n) as mm:
            dst, off = np.frombuffer(mm, dtype=np.uint8), 0
            for t in sd.values():
                k = t.numel() * 4
                np.copyto(dst[off:off + k], t.numpy().reshape(-1).view(np.uint8))
                off += k
            del dst
        out = []
        for i in range(a.iters):
            for t in sd.values():
                t.zero_()
            barrier(a.dir, "cf%d" % i, a.rank, a.world)
            t0 = time.perf_counter()
            with mmap.mmap(fd, n, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ) as mm:
                copy_out(memoryview(mm), lambda k: None)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        os.close(fd)


def restarted(a, sd):
    """A restarted trainer: a new process that builds its state (as it builds its model), then, after
    the barrier, connects to its agent and restores into it. Emits the time, whether the bytes are
    the saved ones, and the agent's count of restores that took the check it made at rest."""
    want = {k: v.clone() for k, v in sd.items()}
    for t in sd.values():
        t.zero_()
    copy_out = state_copier(sd)
    barrier(a.dir, a.tag, a.rank, a.world)
    t0 = time.perf_counter()
    agent = Agent(a.socket)
    it, src = agent.restore_shm(copy_out, stream=True)
    t = time.perf_counter() - t0
    _, frames = agent.status()
    agent.close()
    counters = next(f for f in frames if f.get("name") == "counters")["values"]
    emit(kind="restore_restarted", rank=a.rank, iter=it, source=src, s=t, equal=all(torch.equal(want[k], sd[k]) for k in sd),
         checked_at_rest=int(counters.get("restores_checked_at_rest", 0)))


def merge_restarts(path):
    """Rewrites path's restore_local records with ckpt_s, each rank's median over its
    restore_restarted rounds (and equal, and checked_at_rest: how many of them took the agent's
    check at rest)."""
    rows = [json.loads(l) for l in open(path) if l.strip()]
    rounds = {}
    for r in rows:
        if r["kind"] == "restore_restarted":
            rounds.setdefault(r["rank"], []).append(r)
    for r in rows:
        mine = rounds.get(r["rank"]) if r["kind"] == "restore_local" else None
        if mine:
            r["ckpt_s"] = statistics.median(x["s"] for x in mine)
            r["equal"] = r["equal"] and all(x["equal"] for x in mine)
            r["checked_at_rest"] = max(x["checked_at_rest"] for x in mine)
            r["rounds"]["ckpt"] = [x["s"] for x in mine]
    with open(path, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--state", default="512MiB")
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--restore-peer", action="store_true")
    ap.add_argument("--torch-load", metavar="FILE", help="time torch.load(FILE) after barrier --tag; print seconds")
    ap.add_argument("--tag")
    ap.add_argument("--restarted", action="store_true",
                    help="as a trainer restarted after the one that saved exited: build the state, restore into it after barrier --tag")
    ap.add_argument("--merge", metavar="JSONL", help="put the --restarted rounds' medians into the restore_local records of JSONL")
    a = ap.parse_args()
    torch.set_num_threads(1)
    if a.merge:
        merge_restarts(a.merge)
        return
    if a.torch_load:
        barrier(a.dir, a.tag, a.rank, a.world)
        t0 = time.perf_counter()
        torch.load(a.torch_load)
        print(time.perf_counter() - t0)
        return
    total = size(a.state)
    sd = state_dict(total, a.rank)
    nbytes = sum(t.numel() * 4 for t in sd.values())
    path = os.path.join(a.dir, "rank%d.pt" % a.rank)
    if a.restarted:
        restarted(a, sd)
        return
    agent = Agent(a.socket)

    if a.restore_peer:
        # A replacement agent for this rank holds nothing: the shard comes from a peer.
        for t in sd.values():
            t.zero_()

        copy_out = state_copier(sd)
        t0 = time.perf_counter()
        it, src = agent.restore_shm(copy_out, stream=True)
        t_peer = time.perf_counter() - t0
        t0 = time.perf_counter()
        loaded = torch.load(path)
        t_load = time.perf_counter() - t0
        ok = all(torch.equal(sd[k], loaded[k]) for k in sd)
        emit(kind="restore_peer", rank=a.rank, bytes=nbytes, iter=it, source=src, ckpt_s=t_peer,
             torch_load_s=t_load, equal=ok)
        return

    # torch.save to local disk with fsync, all ranks at once.
    saves = []
    for i in range(a.iters + 1):
        barrier(a.dir, "ts%d" % i, a.rank, a.world)
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            torch.save(sd, f)
            f.flush()
            os.fsync(f.fileno())
        saves.append(time.perf_counter() - t0)
    saves = saves[1:]  # the first is a warm-up
    emit(kind="torch_save", rank=a.rank, bytes=nbytes, stalls=saves, median=statistics.median(saves))

    # ckpt: hand the state over in shared memory; two warm-up saves fault in both buffers.
    arrays = [t.numpy() for t in sd.values()]
    stalls, commits = [], []
    for i in range(a.iters + 2):
        it = i + 1
        barrier(a.dir, "ck%d" % i, a.rank, a.world)
        t0 = time.perf_counter()
        agent.save_shm(it, arrays)
        t1 = time.perf_counter()
        agent.wait(it)
        t2 = time.perf_counter()
        if i >= 2:
            stalls.append(t1 - t0)
            commits.append(t2 - t1)
    emit(kind="ckpt_save", rank=a.rank, bytes=nbytes, stalls=stalls, median=statistics.median(stalls),
         commit_s=commits, commit_median=statistics.median(commits))

    # Restore from local memory (into the state's own tensors) vs torch.load (page cache: the file
    # was just written) in a new process, all ranks at once, ITERS rounds (medians). Here as a trainer
    # that stayed up while the job rolled back (the connection that saved, which keeps the buffer
    # mapped). A restarted trainer's restore, in a new process once this one has exited, is
    # --restarted's (run.sh runs it after this process, and --merge puts its figures in this record).
    want = {k: v.clone() for k, v in list(sd.items())[:1]}
    copy_out = state_copier(sd)

    def restore(tag):
        for t in sd.values():
            t.zero_()
        barrier(a.dir, tag, a.rank, a.world)
        t0 = time.perf_counter()
        it, src = agent.restore_shm(copy_out, stream=True)
        return it, src, time.perf_counter() - t0, all(torch.equal(want[k], sd[k]) for k in want)

    loaded = torch.load(path)  # what the restores are checked against
    t_load, t_kept, ok = [], [], True
    for i in range(a.iters):
        t_load.append(load_fresh(a, path, "tl%d" % i))  # all ranks load at once, as they restore
        it, src, t, good = restore("rk%d" % i)
        t_kept.append(t)
        ok = ok and good and all(torch.equal(loaded[k], sd[k]) for k in sd)
    med = statistics.median
    floor = copy_floor(a, sd, copy_out)
    emit(kind="copy_floor", rank=a.rank, bytes=nbytes, s=med(floor), rounds=floor)
    emit(kind="restore_local", rank=a.rank, bytes=nbytes, iter=it, source=src, ckpt_kept_s=med(t_kept),
         torch_load_s=med(t_load), equal=ok, rounds=dict(kept=t_kept, torch_load=t_load))
    agent.close()


if __name__ == "__main__":
    main()
