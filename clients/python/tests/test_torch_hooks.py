#!/usr/bin/python3
"""trainwire.torch's hashsync DDP hook under a real torchrun (4 CPU processes, gloo for DDP's
own process group): per-step gradients equal gloo DDP's, loss curves too, and a killed sidecar
makes every rank's backward raise an error naming the tool and the rank, at once. One torchrun
run (tests/ddp_worker.py) feeds every test. Skips without torch unless TRAINWIRE_REQUIRE_PYTHON=1.
"""

import os
import shutil
import unittest

import numpy as np

from tests.tools import have_torch, torchrun_class  # noqa: E402

STEPS, WORLD = 20, 4


@unittest.skipUnless(have_torch(), "no torch")
class HashsyncHookUnderTorchrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torchrun_class(cls, "ddp_worker.py", [STEPS], WORLD)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_gradients_equal_gloo_every_step(self):
        for r, z in enumerate(self.arrays):
            for mode in ("dense", "zen"):
                steps = z[mode + ".lockstep"]   # [step, (gloo, hook), params]
                self.assertEqual(steps.shape[0], STEPS)
                for s, (g, h) in enumerate(steps):
                    tol = 1e-6 * np.abs(g).max()
                    self.assertGreater(tol, 0)
                    self.assertLessEqual(np.abs(h - g).max(), tol, "rank %d %s step %d" % (r, mode, s))
                # every rank ends with the same (averaged) gradients
                np.testing.assert_array_equal(steps[:, 1], self.arrays[0][mode + ".lockstep"][:, 1])

    def test_loss_curve_equals_gloo(self):
        for r, z in enumerate(self.arrays):
            want = z["gloo.loss"]
            self.assertEqual(len(want), STEPS)
            for mode in ("dense", "zen"):
                np.testing.assert_allclose(z[mode + ".loss"], want, rtol=1e-5, atol=0,
                                           err_msg="rank %d %s" % (r, mode))

    def test_buckets_in_flight(self):
        for r, info in enumerate(self.info):
            for mode in ("dense", "zen"):
                # the model's two tables make DDP cut 2 buckets once it has rebuilt them after the
                # first step: both requests go out before the first reply is waited for
                self.assertEqual(info[mode]["requests"], 1 + 2 * (STEPS - 1), "rank %d %s" % (r, mode))

    def test_dead_sidecar_raises_naming_rank_and_tool(self):
        for r, info in enumerate(self.info):
            d = info["dead"]
            self.assertEqual(d["step"], 2, "rank %d: %s" % (r, d))
            self.assertIn("hashsync serve", d["error"])
            self.assertIn("rank 1", d["error"], "rank %d" % r)
            self.assertIn("SidecarError", d["error"])
            self.assertLess(d["seconds"], 20, "rank %d" % r)   # the hook's timeout is 30 s
        self.assertIn("killed by SIGKILL", self.info[1]["dead"]["error"])
        for r in (0, 2, 3):   # peer_failed, or (had it exited before the request) its exit 3
            e = self.info[r]["dead"]["error"]
            self.assertTrue("peer_failed" in e or "exit 3" in e, e)
            self.assertIn("rank %d" % r, e)


if __name__ == "__main__":
    unittest.main()
