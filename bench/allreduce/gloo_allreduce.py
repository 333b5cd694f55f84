#!/usr/bin/python3
"""Peer benchmark: torch.distributed (gloo) allreduce of float32 tensors.

One process per rank, launched by a driver (bench/allreduce/run.sh) or by torchrun:

    gloo_allreduce.py --rank R --world W --master HOST:PORT --sizes 1MiB,64MiB --iters 10 --warmup 2

or all ranks at once on loopback:

    gloo_allreduce.py --spawn --world 4 --sizes 64MiB --iters 10

Rank and world fall back to $RANK/$WORLD_SIZE, the master to $MASTER_ADDR:$MASTER_PORT (torchrun).
GLOO_SOCKET_IFNAME, when unset, is set to the interface that carries the route to the master
(lo on loopback, eth0 inside the emulated cluster).

Method, per size: `warmup` untimed allreduces, then `iters` timed ones; before each, the tensor
is refilled with a rank-dependent pattern (untimed) and all ranks meet at a barrier; a second
barrier after each allreduce holds the refill until every rank's timed allreduce is over (as
`hashsync check` holds its verification: work between iterations on a host shared by ranks would
slow the ones still timing). An iteration's time is the slowest rank's (MAX over ranks). algbw = bytes / mean time,
busbw = algbw * 2(W-1)/W (nccl-tests' convention); GB = 1e9 bytes. The result of the last
iteration is checked exactly on every rank (the pattern's sums are exact in float32).

Rank 0 prints one JSON line per size on stdout:
{"op":"allreduce","impl":"gloo","bytes":N,"world":W,"iters":I,"time_s_mean":f,
 "time_s_median":f,"time_s_min":f,"algbw_GBps":f,"busbw_GBps":f,"correct":bool}
Everything else goes to stderr. Exit status: 0 ok, 1 incorrect result, 2 usage, 3 failure.
"""

import argparse
import datetime
import ipaddress
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time

# as bin/hashsync check: 1MiB = 1M = 2^20, 1MB = 10^6
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1000, "kib": 1 << 10, "m": 1 << 20, "mb": 10**6,
          "mib": 1 << 20, "g": 1 << 30, "gb": 10**9, "gib": 1 << 30}


def parse_size(s):
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", s)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError("bad size %r (e.g. 4096, 1MiB, 64MiB, 1GB)" % s)
    n = int(m.group(1)) * _UNITS[m.group(2).lower()]
    if n <= 0 or n % 4:
        raise argparse.ArgumentTypeError("size %r must be a positive multiple of 4 bytes" % s)
    return n


def parse_sizes(s):
    return [parse_size(x) for x in s.split(",") if x.strip()]


def log(*a):
    print("gloo_allreduce:", *a, file=sys.stderr, flush=True)


def iface_for(addr):
    """Name of the local interface whose IPv4 subnet holds addr (lo for loopback)."""
    ip = ipaddress.ip_address(socket.gethostbyname(addr))
    if ip.is_loopback:
        return "lo"
    try:
        out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet":
            if ip in ipaddress.ip_network(parts[3], strict=False):
                return parts[1]
    return None


def free_port(host="127.0.0.1"):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def run_rank(a):
    t_start = time.perf_counter()
    import torch
    import torch.distributed as dist
    t_import = time.perf_counter() - t_start

    torch.set_num_threads(a.threads)
    host, port = a.master.rsplit(":", 1)
    if not os.environ.get("GLOO_SOCKET_IFNAME"):
        ifn = iface_for(host)
        if ifn:
            os.environ["GLOO_SOCKET_IFNAME"] = ifn
    W, R = a.world, a.rank
    t0 = time.perf_counter()
    dist.init_process_group("gloo", init_method="tcp://%s:%s" % (host, port), rank=R,
                            world_size=W, timeout=datetime.timedelta(seconds=a.timeout))
    log("rank %d/%d: torch imported in %.2fs, process group up in %.2fs (GLOO_SOCKET_IFNAME=%s)"
        % (R, W, t_import, time.perf_counter() - t0, os.environ.get("GLOO_SOCKET_IFNAME")))
    all_ok = True
    for nbytes in a.sizes:
        n = nbytes // 4
        # pattern: x_r[i] = (i % 1024) * (r + 1) + r; sum over ranks is exact in float32
        base = (torch.arange(n, dtype=torch.int64) % 1024).to(torch.float32)
        pattern = base * float(R + 1) + float(R)
        expect = base * float(W * (W + 1) // 2) + float(W * (W - 1) // 2)
        del base
        t = torch.empty(n, dtype=torch.float32)
        times = []
        for it in range(a.warmup + a.iters):
            t.copy_(pattern)
            dist.barrier()
            s = time.perf_counter()
            dist.all_reduce(t)
            e = time.perf_counter() - s
            if it >= a.warmup:
                times.append(e)
            if it + 1 < a.warmup + a.iters:
                dist.barrier()  # the refill starts once every rank's timed allreduce is over
        ok = bool(torch.equal(t, expect))
        # slowest rank per iteration, and correctness on every rank
        tt = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(tt, op=dist.ReduceOp.MAX)
        okt = torch.tensor([1 if ok else 0], dtype=torch.int32)
        dist.all_reduce(okt, op=dist.ReduceOp.MIN)
        ok = bool(okt.item())
        all_ok &= ok
        ts = tt.tolist()
        mean = statistics.fmean(ts)
        algbw = nbytes / mean / 1e9
        if R == 0:
            print(json.dumps({
                "op": "allreduce", "impl": "gloo", "bytes": nbytes, "world": W,
                "iters": a.iters, "time_s_mean": mean, "time_s_median": statistics.median(ts),
                "time_s_min": min(ts), "algbw_GBps": algbw,
                "busbw_GBps": algbw * 2 * (W - 1) / W, "correct": ok}), flush=True)
        del pattern, expect, t
    dist.barrier()
    dist.destroy_process_group()
    return 0 if all_ok else 1


def spawn(a):
    """Runs the W ranks as local processes on loopback; relays rank 0's stdout."""
    port = free_port()
    procs = []
    me = os.path.abspath(__file__)
    env = dict(os.environ, GLOO_SOCKET_IFNAME=os.environ.get("GLOO_SOCKET_IFNAME", "lo"))
    common = ["--world", str(a.world), "--master", "127.0.0.1:%d" % port,
              "--sizes", ",".join(str(s) for s in a.sizes), "--iters", str(a.iters),
              "--warmup", str(a.warmup), "--timeout", str(a.timeout),
              "--threads", str(a.threads)]
    deadline = time.monotonic() + a.timeout
    rc = 0
    try:
        for r in range(a.world):
            procs.append(subprocess.Popen([sys.executable, me, "--rank", str(r)] + common,
                                          env=env, stdout=None if r == 0 else subprocess.DEVNULL,
                                          start_new_session=True))
        pending = list(procs)
        while pending:
            for p in list(pending):
                code = p.poll()
                if code is None:
                    continue
                pending.remove(p)
                if code != 0:
                    rc = rc or (code if code in (1, 2) else 3)
                    if code not in (0, 1):
                        log("a rank exited with %d; stopping the others" % code)
                        raise RuntimeError
            if time.monotonic() > deadline:
                log("timeout after %ds" % a.timeout)
                rc = 3
                raise RuntimeError
            time.sleep(0.05)
    except (RuntimeError, KeyboardInterrupt):
        rc = rc or 3
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except OSError:
                    pass
        for p in procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
                p.wait()
    return rc


def main(argv=None):
    p = argparse.ArgumentParser(description="torch.distributed gloo allreduce benchmark")
    p.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "-1")))
    p.add_argument("--world", type=int, default=int(os.environ.get("WORLD_SIZE", "0")))
    p.add_argument("--master", default=None, help="HOST:PORT of rank 0's store "
                   "(default $MASTER_ADDR:$MASTER_PORT)")
    p.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1MiB,64MiB"),
                   help="comma-separated bytes per tensor: 4096, 1MiB, 64MiB, 1GB")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--timeout", type=int, default=300, help="seconds for setup and each op")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    p.add_argument("--spawn", action="store_true", help="run all ranks locally on loopback")
    a = p.parse_args(argv)
    if a.world < 1 or a.iters < 1 or a.warmup < 0:
        p.error("need --world >= 1, --iters >= 1, --warmup >= 0")
    if a.spawn:
        return spawn(a)
    if a.master is None:
        if "MASTER_ADDR" in os.environ and "MASTER_PORT" in os.environ:
            a.master = "%s:%s" % (os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"])
        else:
            p.error("--master HOST:PORT (or $MASTER_ADDR/$MASTER_PORT) is required")
    if not 0 <= a.rank < a.world:
        p.error("--rank must be in [0, world)")
    try:
        return run_rank(a)
    except Exception as e:  # a dead peer, a timeout: a clear message naming this rank
        log("rank %d failed: %s: %s" % (a.rank, type(e).__name__, e))
        return 3


if __name__ == "__main__":
    sys.exit(main())
