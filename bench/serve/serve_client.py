#!/usr/bin/python3
"""bench/serve client: one rank's training process talking to its `hashsync serve` sidecar.

    serve_client.py SOCKET ping ITERS              # round trips of an empty request (ping)
    serve_client.py SOCKET sync BYTES ITERS WARMUP # f32 allreduce of BYTES through shared memory

Only msgpack, mmap and numpy (the protocol: docs/serve.md). Prints one JSON line on stdout:
ping: {"op": "ping", "iters", "p50_us", "p99_us"}; sync: {"op": "sync", "bytes", "iters",
"time_s_median", "time_s_mean", "correct"} (every rank fills rank+1, the sum must be W(W+1)/2).
"""
import json, mmap, os, socket, statistics, struct, sys, time

import msgpack
import numpy as np


class Sidecar:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
        for _ in range(500):
            try:
                self.s.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                time.sleep(0.02)
        self.id = 0

    def call(self, req, fds=()):
        self.id += 1
        req["id"] = self.id
        b = msgpack.packb(req)
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("%di" % len(fds), *fds))] if fds else []
        self.s.sendmsg([struct.pack(">I", len(b)) + b], anc)
        n, = struct.unpack(">I", self.s.recv(4, socket.MSG_WAITALL))
        r = msgpack.unpackb(self.s.recv(n, socket.MSG_WAITALL))
        if not r["ok"]:
            sys.exit("serve_client: %s: %s" % (req["op"], r["error"]))
        return r


def main():
    path, op = sys.argv[1], sys.argv[2]
    sc = Sidecar(path)
    if op == "ping":
        iters = int(sys.argv[3])
        ts = []
        for _ in range(iters):
            t0 = time.perf_counter_ns()
            sc.call({"op": "ping"})
            ts.append((time.perf_counter_ns() - t0) / 1e3)
        ts.sort()
        print(json.dumps({"op": "ping", "iters": iters, "p50_us": ts[len(ts) // 2], "p99_us": ts[int(len(ts) * 0.99)]}))
        return
    nbytes, iters, warmup = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    fd = os.memfd_create("bench", os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, nbytes)
    mem = mmap.mmap(fd, nbytes)
    x = np.frombuffer(mem, "<f4")
    sc.call({"op": "attach", "seg": 0}, [fd])
    req = {"op": "sync", "step": 0, "tensors": [{"name": "bucket", "dtype": "f32", "shape": [nbytes // 4],
                                                 "seg": 0, "off": 0, "len": nbytes}]}
    ts = []
    for i in range(warmup + iters):
        x.fill(rank + 1)  # untimed, as gloo_allreduce.py refills
        req["step"] = i
        t0 = time.perf_counter()
        sc.call(req)
        if i >= warmup:
            ts.append(time.perf_counter() - t0)
    correct = bool((x == world * (world + 1) / 2).all())
    print(json.dumps({"op": "sync", "bytes": nbytes, "world": world, "iters": iters, "rank": rank,
                      "time_s_median": statistics.median(ts), "time_s_mean": statistics.mean(ts), "correct": correct}))


if __name__ == "__main__":
    main()
