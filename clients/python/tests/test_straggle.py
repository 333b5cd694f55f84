#!/usr/bin/python3
"""A Python trainer behind `straggle sync`: two ranks of RNA, each fed by a numpy trainer of the
seed's quadratic toy (f = ½|x|², gradient x + noise) over the stdin/stdout pipes. The trainer
keeps computing (it never waits for a round), tags each gradient with the round its parameters
came from, and applies every round's result as x -= lr * contributors * mean. Checks: the loss
falls below the target, both replicas end bit-identical, every round has 1 or 2 contributors.
Needs the straggle binary ($TRAINWIRE_BIN/straggle, <repo>/bin/straggle, or `go build`).
"""

import os
import subprocess
import threading
import time
import unittest

import numpy as np

from tests.tools import REPO, binary, free_port  # noqa: E402

from trainwire import wire as W  # noqa: E402




class Trainer:
    """One rank's trainer: a compute thread writing gradients, a reader thread applying rounds."""

    DIM, LR, TARGET = 20, 0.01, 0.5

    def __init__(self, rank, world, master, compute_s):
        self.rank, self.compute_s = rank, compute_s
        self.x = np.ones(self.DIM, dtype=np.float32)
        self.applied = 0  # last round applied: the version of self.x
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.rounds = []
        self.rng = np.random.default_rng(rank + 1)
        self.proc = subprocess.Popen(
            [binary("straggle"), "sync", "--rank", str(rank), "--world", str(world), "--master", master,
             "--timeout", "20s", "--log-level", "warn"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.err = b""

    def loss(self):
        return 0.5 * float(np.sum(self.x.astype(np.float64) ** 2))

    def compute(self):
        w = W.Writer(self.proc.stdin, producer="test_straggle")
        while not self.done.is_set():
            with self.lock:
                v, x = self.applied, self.x.copy()
            time.sleep(self.compute_s)
            g = (x + self.rng.normal(0, 1, self.DIM)).astype(np.float32)
            try:
                w.write(W.dense("x", g, step=v))
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                return
        w.close()
        self.proc.stdin.close()

    def read(self):
        cur = None
        for f in W.Reader(self.proc.stdout):
            if f["t"] == "stats":
                cur = f
            elif f["t"] == "dense":
                mean = W.to_numpy(f)
                c = cur["values"]["contributors"]
                with self.lock:
                    self.x -= np.float32(self.LR * c) * mean
                    self.applied = f["step"]
                    self.rounds.append((f["step"], c))
                    if self.loss() <= self.TARGET:
                        self.done.set()

    def run(self):
        threads = [threading.Thread(target=self.compute), threading.Thread(target=self.read)]
        for t in threads:
            t.start()
        return threads


class StraggleFromPython(unittest.TestCase):
    def test_trainer_behind_rna(self):
        master = "127.0.0.1:%d" % free_port()
        # Rank 1 computes 3x slower: RNA rounds do not wait for it.
        trainers = [Trainer(0, 2, master, 0.01), Trainer(1, 2, master, 0.03)]
        threads = [t.run() for t in trainers]
        deadline = time.time() + 60
        while not all(t.done.is_set() for t in trainers) and time.time() < deadline:
            if any(t.done.is_set() for t in trainers):
                for t in trainers:
                    t.done.set()  # one replica reached the target: stop feeding both
            time.sleep(0.01)
        for t in trainers:
            t.done.set()
        for t, th in zip(trainers, threads):
            th[0].join(30)
            th[1].join(60)
            t.proc.wait(timeout=60)
            err = t.proc.stderr.read()
            t.proc.stdout.close()
            t.proc.stderr.close()
            self.assertEqual(t.proc.returncode, 0, err.decode())
        a, b = trainers
        self.assertGreater(len(a.rounds), 10)
        self.assertEqual([r for r, _ in a.rounds], list(range(1, len(a.rounds) + 1)))
        self.assertEqual(a.rounds, b.rounds)
        for _, c in a.rounds:
            self.assertIn(c, (1.0, 2.0))
        np.testing.assert_array_equal(a.x, b.x)
        self.assertLess(a.loss(), 1.0)


if __name__ == "__main__":
    unittest.main()
