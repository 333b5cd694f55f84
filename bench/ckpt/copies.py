#!/usr/bin/python3
"""The Python client's large copies against plain numpy copies, in one run (no agent needed).

    /usr/bin/python3 bench/ckpt/copies.py [--mib 256]

glibc's memcpy copies large blocks with non-temporal stores and runs at less than half speed when
the destination sits a few hundred bytes after the source modulo a 4 KiB page. The restore's
unpack_state copies each tensor out of the agent's buffer (trainwire.ckpt.copy_out places the copy
at the source's offset in its page; numpy's .copy() is the peer), and save_shm copies each tensor
into it (trainwire.ckpt.copy_bytes goes in pieces when the offsets are the slow case; np.copyto is
the peer). Prints GB/s of each, best of 5, and ours ÷ peer.
"""
import argparse
import mmap
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python"))
from trainwire.ckpt import copy_bytes, copy_out  # noqa: E402


def best(f, n, reps=5):
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
    return n / min(ts) / 1e9


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=256)
    n = ap.parse_args().mib << 20
    fd = os.memfd_create("copies")
    os.ftruncate(fd, n + 8192)
    with mmap.mmap(fd, n + 8192) as mm:
        shm = np.frombuffer(mm, np.uint8)
        shm[:] = 7
        print("%d MiB, GB/s (best of 5)" % (n >> 20))
        for off in (0, 64, 3968):  # restore: the tensor's offset in the agent's buffer's page
            src = shm[off:off + n]
            peer = best(lambda: src.copy(), n)
            ours = best(lambda: copy_out(src), n)
            print("unpack, source at page offset %4d: numpy .copy() %5.2f  copy_out %5.2f  %.2fx" % (off, peer, ours, ours / peer))
        mem = np.empty(n + 8192, np.uint8)
        mem[:] = 3
        src = mem[(-mem.ctypes.data) % 4096:][:n]  # a page-aligned tensor
        for d in (16, 200, 1024):  # save: where the tensor lands in the buffer's page
            dst = shm[d:d + n]
            peer = best(lambda: np.copyto(dst, src), n)
            ours = best(lambda: copy_bytes(dst, src), n)
            print("save, destination - source = %4d mod 4096: np.copyto %5.2f  copy_bytes %5.2f  %.2fx" % (d, peer, ours, ours / peer))
        del shm, dst
    os.close(fd)


if __name__ == "__main__":
    main()
