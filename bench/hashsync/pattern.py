#!/usr/bin/python3
"""A zen step's traffic with bare TCP sockets and no computation: what the network gives the pattern.

    pattern.py --rank R --world N --hosts H0,H1,... [--push BYTES] [--pull BYTES] [--steps S]

Every rank opens one connection to every other rank. A step: all ranks meet at a barrier; each
sends --push bytes to every other rank (zen's push) and receives as many from each; once a rank
has every push, it sends --pull bytes to every other rank (its pull, which needs every push
first), and the step ends on a rank when every other rank's pull is in. Sends to the peers run at
once, one thread each, as hashsync's do. Rank 0 prints one JSON line per step (the first is
warm-up): the slowest rank's step time and the latest "every push in" time. Defaults: the bytes a
rank received per peer in `bench/hashsync/run.sh`'s 4-rank deepfm run (push 467,908; pull
1,388,443 with its 32 KB head).

Run inside the emulated cluster, one rank per host: bench/hashsync/pattern.sh.
"""

import argparse
import json
import socket
import struct
import threading
import time

PORT = 29611


def recv_exact(c, n, buf):
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        k = c.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed")
        got += k


def connect_all(rank, world, hosts, timeout):
    """out[q]: this rank's connection to q (it sends on it); inc[q]: q's to this rank."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((hosts[rank], PORT))
    ls.listen(world)
    inc, out = {}, {}

    def accept():
        for _ in range(world - 1):
            c, _ = ls.accept()
            q = struct.unpack("<I", c.recv(4, socket.MSG_WAITALL))[0]
            inc[q] = c

    t = threading.Thread(target=accept)
    t.start()
    deadline = time.time() + timeout
    for q in range(world):
        if q == rank:
            continue
        while True:
            try:
                c = socket.create_connection((hosts[q], PORT), timeout=2)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.05)
        c.settimeout(timeout)
        c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.sendall(struct.pack("<I", rank))
        out[q] = c
    t.join(timeout)
    ls.close()
    for c in inc.values():
        c.settimeout(timeout)
    return out, inc


def all_threads(fns):
    ts = [threading.Thread(target=f) for f in fns]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def barrier(out, inc):
    all_threads([lambda c=c: c.sendall(b"b") for c in out.values()] +
                [lambda c=c: recv_exact(c, 1, bytearray(1)) for c in inc.values()])


def step(out, inc, push, pull, bufs):
    """One step; returns (seconds until every push was in, seconds until every pull was in)."""
    payload_push, payload_pull = bytes(push), bytes(pull)
    t0 = time.perf_counter()
    pushed = threading.Event()
    left = [len(inc)]
    lock = threading.Lock()
    t_push = [0.0]

    def receiver(q, c):  # one thread a peer: its push, then its pull
        recv_exact(c, push, bufs[q])
        with lock:
            left[0] -= 1
            if left[0] == 0:
                t_push[0] = time.perf_counter() - t0
                pushed.set()
        recv_exact(c, pull, bufs[q])

    def sender(c):  # one thread a peer: this rank's push, then (every push in) its pull
        c.sendall(payload_push)
        pushed.wait()
        c.sendall(payload_pull)

    all_threads([lambda c=c: sender(c) for c in out.values()] +
                [lambda q=q, c=c: receiver(q, c) for q, c in inc.items()])
    return t_push[0], time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--hosts", required=True)
    ap.add_argument("--push", type=int, default=467908)
    ap.add_argument("--pull", type=int, default=1388443)
    ap.add_argument("--steps", type=int, default=11)
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    hosts = a.hosts.split(",")
    out, inc = connect_all(a.rank, a.world, hosts, a.timeout)
    bufs = {q: bytearray(max(a.push, a.pull)) for q in inc}
    for s in range(a.steps):
        barrier(out, inc)
        tp, tt = step(out, inc, a.push, a.pull, bufs)
        # the slowest rank's figures, gathered on rank 0 over the same connections
        mine = struct.pack("<dd", tp, tt)
        if a.rank == 0:
            got = [(tp, tt)]
            for c in inc.values():
                b = bytearray(16)
                recv_exact(c, 16, b)
                got.append(struct.unpack("<dd", b))
            print(json.dumps({"step": s, "push_in_s": max(g[0] for g in got), "step_s": max(g[1] for g in got),
                              "push": a.push, "pull": a.pull, "world": a.world}), flush=True)
        else:
            out[0].sendall(mine)
    for c in list(out.values()) + list(inc.values()):
        c.close()


if __name__ == "__main__":
    main()
