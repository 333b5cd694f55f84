#!/usr/bin/python3
"""The hooks' failure contract (tests/fail_worker.py, 4 processes with torch.distributed's
variables set by hand, so that a dead rank does not make a launcher kill the survivors):

- a dead sidecar, or a dead peer, makes loss.backward() raise a Python exception naming the
  tool and the rank, well within the hooks' 30 s deadline (no hang): hashsync's sidecar killed
  (tests/test_torch_hooks.py), straggle's sidecar killed, a hashsync rank's trainer killed by
  SIGKILL (its sidecar orphaned, as under torchrun), a straggle allreduce rank killed with its
  sidecar; in rna mode the others go on without the dead rank (RNA's contract);
- gradients of different sizes on different ranks fail with an error naming the ranks and the
  sizes (hashsync: the sidecars' agreement; straggle: every rank's --dim compared at start).
  DDP itself refuses models whose parameters differ in shape, before any hook runs.
"""

import os
import re
import shutil
import tempfile
import unittest

from tests.tools import binary, free_port, have_torch, launch_ranks, load_json, read_log  # noqa: E402

WORLD, DEADLINE = 4, 20   # the hooks' timeout is 30 s; a failure must come well before


def launch(self, *scenarios):
    d = tempfile.mkdtemp(prefix="tw-fail-")
    self.addCleanup(shutil.rmtree, d, True)
    procs = launch_ranks("fail_worker.py", [d] + list(scenarios), WORLD)
    for p in procs:
        self.addCleanup(os.unlink, p.log)
    try:
        for p in procs:
            p.wait(timeout=300)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    out = {}
    for r, p in enumerate(procs):
        path = os.path.join(d, "r%d.json" % r)
        if p.returncode == -9 and not os.path.exists(path):
            continue   # killed in the first scenario
        self.assertIn(p.returncode, (0, -9), "rank %d:\n%s" % (r, read_log(p)[-4000:]))
        self.assertTrue(os.path.exists(path), "rank %d exit %s:\n%s" % (r, p.returncode, read_log(p)[-4000:]))
        out[r] = load_json(path)
    return procs, out


@unittest.skipUnless(have_torch(), "no torch")
class HookFailures(unittest.TestCase):
    def assertFailed(self, rec, tool, *names):
        self.assertIsNotNone(rec["error"], rec)
        self.assertIn("SidecarError", rec["error"])
        self.assertIn(tool, rec["error"])
        for n in names:
            self.assertRegex(rec["error"], r"\b%s\b" % re.escape(n))
        self.assertLess(rec["seconds"], DEADLINE, rec["error"])

    def test_shapes_sidecar_and_trainer_deaths(self):
        procs, out = launch(self, "shapes", "straggle-shapes", "straggle-sidecar", "orphan")
        for r in range(WORLD):
            # rank 1's 5 elements against the others' 4: named on every rank, serving goes on
            e = out[r]["shapes"]
            self.assertFailed(e, "hashsync serve of rank %d" % r, "mismatch")
            self.assertIn("rank %d asks for step 0 with 1 tensors of %d bytes" % ((1, 20) if r != 1 else (0, 16)),
                          e["error"])
            e = out[r]["straggle-shapes"]
            self.assertFailed(e, "straggle serve of rank %d" % r, "exit 80")
            other = 0 if r == 1 else 1
            self.assertIn("--dim %d on this rank (%d), %d on rank %d" % (5 if r == 1 else 4, r,
                          5 if other == 1 else 4, other), e["error"])
        # straggle rna: rank 1's sidecar killed before its third step; the others train on
        self.assertFailed(out[1]["straggle-sidecar"], "straggle serve of rank 1", "killed by SIGKILL")
        self.assertEqual(out[1]["straggle-sidecar"]["step"], 2)
        for r in (0, 2, 3):
            self.assertEqual(out[r]["straggle-sidecar"], {"step": None, "error": None, "steps": 5,
                                                         "replies": 5}, "rank %d" % r)
        # hashsync: rank 2's trainer killed, its sidecar orphaned: the others raise naming it
        self.assertEqual(procs[2].returncode, -9)
        self.assertNotIn("orphan", out[2])
        for r in (0, 1, 3):
            e = out[r]["orphan"]
            self.assertEqual(e["step"], 2, e)
            self.assertFailed(e, "hashsync serve of rank %d" % r, "peer_failed", "rank 2 failed")

    def test_straggle_allreduce_dead_peer(self):
        procs, out = launch(self, "straggle-peer")
        self.assertEqual(procs[2].returncode, -9)
        for r in (0, 1, 3):
            e = out[r]["straggle-peer"]
            self.assertEqual(e["step"], 2, e)
            self.assertFailed(e, "straggle serve of rank %d" % r, "peer_failed", "rank 2 failed")


if __name__ == "__main__":
    unittest.main()


@unittest.skipUnless(have_torch(), "no torch")
class Refusals(unittest.TestCase):
    """What the hooks refuse before sending anything, in this process (world 1): a float64
    model's buckets fail the step with an error naming the hook, the rank and the dtype."""

    def test_float64_buckets(self):
        import torch
        import torch.distributed as dist
        from torch import nn
        from torch.nn.parallel import DistributedDataParallel as DDP
        from trainwire.torch import hashsync_hook, straggle_hook
        dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % free_port(), rank=0, world_size=1)
        self.addCleanup(dist.destroy_process_group)
        kw = {"rank": 0, "world": 1, "connect_timeout": 60}
        for name, make in (("hashsync", lambda m: hashsync_hook("dense", binary=binary("hashsync"), **kw)),
                           ("straggle", lambda m: straggle_hook(m, binary=binary("straggle"), **kw))):
            m = DDP(nn.Sequential(nn.Linear(4, 8), nn.Linear(8, 1)).double(), bucket_cap_mb=0.0001)
            state, hook = make(m)
            self.addCleanup(state.close)
            m.register_comm_hook(state, hook)
            with self.assertRaises(RuntimeError) as cm:
                m(torch.ones(2, 4, dtype=torch.float64)).sum().backward()
            self.assertRegex(str(cm.exception), r"%s hook of rank 0: .*bucket \d+ is torch.float64 on cpu" % name)
            self.assertEqual(state.requests if name == "hashsync" else state.steps, 0)
