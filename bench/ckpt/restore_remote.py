#!/usr/bin/python3
"""One rank of bench/ckpt/restore.sh (the emulated cluster): after losing its machine, rank R gets
its state back either from a peer's memory (ckpt restore, through its replacement agent) or, the
alternative a user has without ckpt, with torch.load of the file a persistent store on another
host holds (fetched over the same shaped link, then loaded).

    restore_remote.py save --rank R --world W --socket S --state SIZE --persist DIR
    restore_remote.py restore --rank R --world W --socket S --state SIZE --url URL --rate BYTES_PER_S \
        --ready FILE --started FILE

save: hands the state to the agent (iteration 1), waits for the global commit, and torch.saves the
same state into DIR (fsync), which restore.sh serves from host 0. restore: ckpt restore (timed from
the replacement agent's start to the state's tensors filled), then the file fetched from URL into memory and torch.load'ed (timed
from the first byte asked to the state dict in hand); both compared with the state. One JSON line.
"""
import argparse
import io
import os
import sys
import time
import urllib.request

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from bench import emit, size, state_copier, state_dict  # noqa: E402
from trainwire.ckpt import Agent  # noqa: E402


def save(a, sd):
    agent = Agent(a.socket)
    agent.save_shm(1, [t.numpy() for t in sd.values()])
    agent.wait(1, timeout="600s")
    agent.close()
    path = os.path.join(a.persist, "rank%d.pt" % a.rank)
    with open(path + ".tmp", "wb") as f:
        torch.save(sd, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(path + ".tmp", path)
    emit(kind="saved", rank=a.rank, bytes=sum(t.numel() * 4 for t in sd.values()))


def restore(a, sd):
    """Ready (torch imported, the state allocated) before the replacement agent starts; timed from
    the agent's start (the wall time restore.sh wrote to --started) to the state's tensors filled:
    the replacement fetches its shard from its peers as it starts, and the restore gets it."""
    want = {k: v.clone() for k, v in sd.items()}
    nbytes = sum(t.numel() * 4 for t in sd.values())
    for t in sd.values():
        t.zero_()
    copy_out = state_copier(sd)
    open(a.ready, "w").close()
    while not (os.path.exists(a.socket) and os.path.exists(a.started)):
        time.sleep(0.001)
    agent = Agent(a.socket)
    it, src = agent.restore_shm(copy_out, stream=True)
    t_peer = time.time() - float(open(a.started).read())
    agent.close()
    ok_peer = all(torch.equal(want[k], sd[k]) for k in sd)
    t0 = time.perf_counter()
    data = urllib.request.urlopen(a.url, timeout=600).read()
    t_fetch = time.perf_counter() - t0
    loaded = torch.load(io.BytesIO(data))
    t_remote = time.perf_counter() - t0
    ok_remote = all(torch.equal(want[k], loaded[k]) for k in want)
    emit(kind="restore_remote", rank=a.rank, bytes=nbytes, iter=it, source=src, ckpt_s=t_peer,
         ckpt_link_share=nbytes / t_peer / a.rate, file_bytes=len(data), fetch_s=t_fetch,
         torch_load_remote_s=t_remote, equal=ok_peer and ok_remote)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["save", "restore"])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--state", default="512MiB")
    ap.add_argument("--persist")
    ap.add_argument("--url")
    ap.add_argument("--rate", type=float, default=125e6)
    ap.add_argument("--ready", help="restore: touched once ready for the replacement agent")
    ap.add_argument("--started", help="restore: holds the replacement agent's start (Unix seconds)")
    a = ap.parse_args()
    sd = state_dict(size(a.state), a.rank)
    save(a, sd) if a.what == "save" else restore(a, sd)


if __name__ == "__main__":
    main()
