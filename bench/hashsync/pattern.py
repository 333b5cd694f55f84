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

--pieces K (K > 1) models a protocol zen does not have yet, where the push and the pull overlap:
each push goes out in K pieces (position ranges of the rows), and a rank sends piece k of its pull
as soon as piece k of every push is in, on a second connection to each peer, while later push
pieces still travel.

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


def connect_all(rank, world, hosts, timeout, port=PORT):
    """out[q]: this rank's connection to q (it sends on it); inc[q]: q's to this rank."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((hosts[rank], port))
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
                c = socket.create_connection((hosts[q], port), timeout=2)
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


def pieces(n, k):
    """The byte bounds of n bytes in k near-equal pieces."""
    return [(n * i // k, n * (i + 1) // k) for i in range(k)]


def step_overlapped(out, inc, out2, inc2, push, pull, k, bufs):
    """One step of the overlapped protocol (see --pieces); returns as step does."""
    payload_push, payload_pull = bytes(push), bytes(pull)
    pp, pl = pieces(push, k), pieces(pull, k)
    t0 = time.perf_counter()
    ready = [threading.Event() for _ in range(k)]
    left = [len(inc)] * k
    lock = threading.Lock()
    t_push = [0.0]

    def push_receiver(q, c):
        for i, (a, b) in enumerate(pp):
            recv_exact(c, b - a, bufs[q])
            with lock:
                left[i] -= 1
                if left[i] == 0:
                    if i == k - 1:
                        t_push[0] = time.perf_counter() - t0
                    ready[i].set()

    def pull_sender(c):
        for i, (a, b) in enumerate(pl):
            ready[i].wait()
            c.sendall(payload_pull[a:b])

    all_threads([lambda c=c: c.sendall(payload_push) for c in out.values()] +
                [lambda q=q, c=c: push_receiver(q, c) for q, c in inc.items()] +
                [lambda c=c: pull_sender(c) for c in out2.values()] +
                [lambda q=q, c=c: recv_exact(c, pull, bytearray(pull)) for q, c in inc2.items()])
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
    ap.add_argument("--pieces", type=int, default=1, help="K > 1: the push and the pull overlap in K position ranges")
    a = ap.parse_args()
    hosts = a.hosts.split(",")
    out, inc = connect_all(a.rank, a.world, hosts, a.timeout)
    if a.pieces > 1:
        out2, inc2 = connect_all(a.rank, a.world, hosts, a.timeout, PORT + 1)
    bufs = {q: bytearray(max(a.push, a.pull)) for q in inc}
    for s in range(a.steps):
        barrier(out, inc)
        if a.pieces > 1:
            tp, tt = step_overlapped(out, inc, out2, inc2, a.push, a.pull, a.pieces, bufs)
        else:
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
                              "push": a.push, "pull": a.pull, "world": a.world, "pieces": a.pieces}), flush=True)
        else:
            out[0].sendall(mine)
    for c in list(out.values()) + list(inc.values()) + (list(out2.values()) + list(inc2.values()) if a.pieces > 1 else []):
        c.close()


if __name__ == "__main__":
    main()
