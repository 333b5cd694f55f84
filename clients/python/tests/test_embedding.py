#!/usr/bin/python3
"""trainwire.embedding and examples/dlrm.py: the DLRM example trains under torchrun with 4 CPU
processes through `hashsync alltoall` (async, sync and scatter modes, and placed by a `hashsync
place` plan), its sharded lookups equal a single process's bit for bit (--check), its loss falls;
a plan with a table cut row-wise is refused. Through `hashsync serve` alltoall requests, the
pipelined schedule gives the sequential one's parameters bit for bit, within staleness 3; a rank
whose sidecar is killed fails the others with a SidecarError naming it. Skips without torch unless TRAINWIRE_REQUIRE_PYTHON=1.
"""

import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

from tests.tools import REPO, binary, free_launcher_port, free_port, PYROOT  # noqa: E402

from trainwire import wire as W  # noqa: E402

try:
    import torch  # noqa: F401
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

TORCHRUN = "/usr/bin/torchrun"


def need_torch():
    if not HAVE_TORCH or not os.path.exists(TORCHRUN):
        if os.environ.get("TRAINWIRE_REQUIRE_PYTHON") == "1":
            raise AssertionError("torch and torchrun are required")
        raise unittest.SkipTest("no torch or torchrun")


def dlrm(*args, nproc=4):
    """Runs examples/dlrm.py under torchrun; returns rank 0's JSON lines."""
    env = dict(os.environ, PYTHONPATH=PYROOT, TRAINWIRE_BIN=os.path.dirname(binary("hashsync")))
    cmd = [TORCHRUN, "--nproc_per_node", str(nproc), "--master_addr", "127.0.0.1", "--master_port",
           str(free_launcher_port()), "--redirects", "9:0", "--tee", "9:0", os.path.join(REPO, "examples", "dlrm.py")] + list(args)
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=300)
    if p.returncode != 0:
        raise AssertionError("dlrm.py failed (%d): %s" % (p.returncode, p.stderr.decode()[-3000:]))
    return [json.loads(l) for l in p.stdout.decode().splitlines() if l.startswith("{")]


class DLRMExample(unittest.TestCase):
    def test_trains_and_matches_one_process(self):
        need_torch()
        for mode in ("async", "scatter"):
            lines = dlrm("--steps", "25", "--check", "--mode", mode)
            summary = lines[-1]
            self.assertTrue(summary["summary"])
            self.assertEqual(summary["world"], 4)
            self.assertLess(summary["last_loss"], summary["first_loss"], mode)

    def test_placed_by_hashsync_place(self):
        need_torch()
        tables = ",".join("t%d:%d:16:%d" % (i, r, r) for i, r in enumerate([4000, 1000, 8000, 500, 2000, 3000, 6000, 1500]))
        plan = subprocess.run([binary("hashsync"), "place", "--ranks", "4", "--table", tables, "--algo", "size-greedy"],
                              stdout=subprocess.PIPE, check=True).stdout
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tw-dlrm-plan-%d.tw" % os.getpid())
        with open(path, "wb") as f:
            f.write(plan)
        try:
            lines = dlrm("--steps", "5", "--check", "--plan", path, "--mode", "sync")
            self.assertTrue(lines[-1]["summary"])
        finally:
            os.unlink(path)

    def test_row_wise_plan(self):
        """A plan that cuts the hot table t2 into 4 row ranges: the sharded lookups equal one
        process's (to rounding: partial sums), and training follows the whole-table run."""
        need_torch()
        tables = ",".join("t%d:%d:16:%d" % (i, r, r * (10 if i == 2 else 1))
                          for i, r in enumerate([4000, 1000, 8000, 500, 2000, 3000, 6000, 1500]))
        plan = subprocess.run([binary("hashsync"), "place", "--ranks", "4", "--table", tables],
                              stdout=subprocess.PIPE, check=True).stdout
        frame = next(f for f in W.Reader(io.BytesIO(plan)) if f["t"] == "plan")
        self.assertEqual(sum(it["table"] == "t2" for it in frame["items"]), 4)
        from trainwire.embedding import shards_from_plan
        shards = shards_from_plan(frame, [("t%d" % i, r, 16) for i, r in enumerate([4000, 1000, 8000, 500, 2000, 3000, 6000, 1500])])
        self.assertEqual([(lo, hi) for t, lo, hi, _ in shards if t == 2], [(0, 2000), (2000, 4000), (4000, 6000), (6000, 8000)])
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "tw-dlrm-rowplan-%d.tw" % os.getpid())
        with open(path, "wb") as f:
            f.write(plan)
        try:
            cut = dlrm("--steps", "8", "--check", "--plan", path)[-1]
            whole = dlrm("--steps", "8", "--check")[-1]
        finally:
            os.unlink(path)
        self.assertAlmostEqual(cut["first_loss"], whole["first_loss"], places=5)
        self.assertAlmostEqual(cut["last_loss"], whole["last_loss"], places=4)
        bad = dict(frame, items=[it for it in frame["items"] if not (it["table"] == "t2" and it["row_lo"] == 2000)])
        with self.assertRaisesRegex(ValueError, "ranges of table 't2'"):
            shards_from_plan(bad, [("t%d" % i, r, 16) for i, r in enumerate([4000, 1000, 8000, 500, 2000, 3000, 6000, 1500])])

    def test_row_split_plan_refused(self):
        need_torch()
        from trainwire.embedding import owners_from_plan
        plan = subprocess.run([binary("hashsync"), "place", "--ranks", "4", "--table", "hot:1000:16:100,cold:10:16:1"],
                              stdout=subprocess.PIPE, check=True).stdout
        frame = next(f for f in W.Reader(io.BytesIO(plan)) if f["t"] == "plan")
        with self.assertRaisesRegex(ValueError, "table 'hot' is cut row-wise"):
            owners_from_plan(frame, ["hot", "cold"])
        with self.assertRaisesRegex(ValueError, "places no table named 'x'"):
            owners_from_plan({"kind": "embedding", "items": []}, ["x"])


class Pipeline(unittest.TestCase):
    def params(self, *args):
        d = tempfile.mkdtemp(prefix="tw-dlrm-")
        lines = dlrm("--steps", "12", "--dump", d, *args)
        return lines[-1], [dict(np.load(os.path.join(d, "rank%d.npz" % r))) for r in range(4)]

    def test_pipelined_equals_sequential(self):
        need_torch()
        pipe, p = self.params("--schedule", "pipe", "--staleness", "3")
        seq, q = self.params("--schedule", "seq", "--staleness", "3")
        fresh, f = self.params("--schedule", "seq", "--staleness", "0")
        self.assertEqual((pipe["max_staleness"], seq["max_staleness"], fresh["max_staleness"]), (3, 3, 0))
        self.assertLess(pipe["last_loss"], pipe["first_loss"])
        for r in range(4):
            self.assertEqual(sorted(p[r]), sorted(q[r]))
            for k in p[r]:
                self.assertTrue(np.array_equal(p[r][k], q[r][k]), "rank %d %s" % (r, k))
        # the schedule matters: staleness 0 gives other tables
        self.assertFalse(all(np.array_equal(p[r][k], f[r][k]) for r in range(4) for k in p[r]))

    def test_killed_sidecar_names_the_rank(self):
        need_torch()
        world, victim = 4, 2
        worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "a2a_worker.py")
        env = dict(os.environ, PYTHONPATH=PYROOT, TRAINWIRE_BIN=os.path.dirname(binary("hashsync")))
        master = "127.0.0.1:%d" % free_port()
        procs = [subprocess.Popen([sys.executable, worker, str(r), str(world), master, str(victim)], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE) for r in range(world)]
        for r, p in enumerate(procs):
            out, err = p.communicate(timeout=120)
            if r == victim:
                continue
            self.assertEqual(p.returncode, 3, "rank %d: %s %s" % (r, out.decode(), err.decode()[-2000:]))
            rep = json.loads(out.decode().strip().splitlines()[-1])
            self.assertIn("rank 2", rep["error"])
            self.assertEqual(rep["code"], "peer_failed")


if __name__ == "__main__":
    unittest.main()
