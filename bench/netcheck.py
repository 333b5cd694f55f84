#!/usr/bin/python3
"""Link throughput check with plain TCP sockets (no iperf3 needed).

    netcheck.py recv --bind ADDR [--port P] [--timeout S]
        listens (--port 0, the default, picks a free port), prints "PORT P" as its first line,
        accepts one connection, counts bytes until EOF, then prints one JSON line:
        {"role":"recv","bind":..,"peer":..,"bytes":N,"seconds":s,"gbit_s":g}
    netcheck.py send --to ADDR:PORT [--seconds S] [--bytes N]
        sends zeros for S seconds (or N bytes), prints the same JSON line for the sender side.

The receiver's number is the one to trust (bytes that crossed the link / time from first to
last byte). Used by bench/cluster.sh check.
"""

import argparse
import json
import socket
import sys
import time


def recv(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((args.bind, args.port))
    s.listen(1)
    s.settimeout(args.timeout)
    print("PORT %d" % s.getsockname()[1], flush=True)
    c, peer = s.accept()
    c.settimeout(args.timeout)
    buf = bytearray(1 << 20)
    mv = memoryview(buf)
    total = 0
    t0 = t1 = None
    while True:
        n = c.recv_into(mv)
        if not n:
            break
        t1 = time.perf_counter()
        if t0 is None:
            t0 = t1
            first = n
        total += n
    c.close()
    s.close()
    secs = (t1 - t0) if t0 is not None and t1 > t0 else 0.0
    counted = total - first if t0 is not None else 0   # bytes after the first read's timestamp
    out = {"role": "recv", "bind": args.bind, "peer": peer[0], "bytes": total,
           "seconds": round(secs, 6), "gbit_s": round(counted * 8 / secs / 1e9, 4) if secs else 0}
    print(json.dumps(out), flush=True)


def send(args):
    host, port = args.to.rsplit(":", 1)
    c = socket.create_connection((host, int(port)), timeout=args.timeout)
    block = bytes(1 << 20)
    mv = memoryview(block)
    total = 0
    t0 = time.perf_counter()
    deadline = t0 + args.seconds
    limit = args.bytes or float("inf")
    while total < limit:
        n = c.send(mv[: int(min(len(block), limit - total))])
        total += n
        if not args.bytes and time.perf_counter() >= deadline:
            break
    c.shutdown(socket.SHUT_WR)
    c.recv(1)  # wait for the receiver to finish reading (it closes)
    c.close()
    secs = time.perf_counter() - t0
    print(json.dumps({"role": "send", "to": args.to, "bytes": total, "seconds": round(secs, 6),
                      "gbit_s": round(total * 8 / secs / 1e9, 4)}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("recv")
    r.add_argument("--bind", required=True)
    r.add_argument("--port", type=int, default=0)
    r.add_argument("--timeout", type=float, default=60.0)
    s = sub.add_parser("send")
    s.add_argument("--to", required=True)
    s.add_argument("--seconds", type=float, default=3.0)
    s.add_argument("--bytes", type=int, default=0)
    s.add_argument("--timeout", type=float, default=60.0)
    a = p.parse_args()
    (recv if a.cmd == "recv" else send)(a)


if __name__ == "__main__":
    sys.exit(main())
