#!/usr/bin/python3
"""trainwire.torch.GradSync: plan-driven gradient sync on `hashsync serve` without DDP.
Under torchrun (4 CPU processes, tests/gradsync_worker.py): with a fusion plan of 3 groups (not
in backprop order) and with the default one group per parameter, every step's gradients equal
gloo DDP's (max abs diff <= 1e-6 x max|g|), every group goes out from the gradient hooks during
backward, one request per group and step. Bad plans are refused before any sidecar starts.
"""

import os
import shutil
import tempfile
import unittest

import numpy as np

from tests.tools import have_torch, torchrun_class  # noqa: E402

from trainwire import Writer, plan  # noqa: E402

WORLD, STEPS = 4, 4
GROUPS = [["fc3.weight", "fc1.bias"], ["fc2.weight", "fc2.bias", "fc3.bias"], ["fc1.weight"]]


def write_plan(path, groups, kind="fusion"):
    with open(path, "wb") as f, Writer(f, producer="test_torch_gradsync") as w:
        w.write(plan(kind, "test", [[i, i] for i in range(len(groups))], [{"names": g} for g in groups]))


@unittest.skipUnless(have_torch(), "no torch")
class GradSyncUnderTorchrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d = tempfile.mkdtemp(prefix="tw-plan-")
        try:
            write_plan(os.path.join(d, "plan.tw"), GROUPS)
            torchrun_class(cls, "gradsync_worker.py", [os.path.join(d, "plan.tw"), STEPS], WORLD)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_gradients_equal_gloo_ddp(self):
        for r in range(WORLD):
            for name in ("plan", "default"):
                steps = self.arrays[r][name]     # [step, (gloo, gradsync), params]
                self.assertEqual(steps.shape[0], STEPS)
                for s, (g, h) in enumerate(steps):
                    self.assertLessEqual(np.abs(h - g).max(), 1e-6 * np.abs(g).max(), "rank %d %s step %d" % (r, name, s))
                np.testing.assert_array_equal(steps[:, 1], self.arrays[0][name][:, 1])

    def test_groups_sent_from_the_hooks(self):
        for r in range(WORLD):
            info = self.info[r]
            self.assertEqual(info["plan"], {"groups": 3, "requests": 3 * STEPS, "sent_in_backward": [3] * STEPS})
            self.assertEqual(info["default"], {"groups": 6, "requests": 6 * STEPS, "sent_in_backward": [6] * STEPS})


@unittest.skipUnless(have_torch(), "no torch")
class BadPlans(unittest.TestCase):
    def test_refused_before_any_sidecar(self):
        from torch import nn
        from trainwire.torch import GradSync
        net = nn.Sequential(nn.Linear(2, 2))
        d = tempfile.mkdtemp(prefix="tw-plan-")
        self.addCleanup(shutil.rmtree, d, True)
        cases = [([["0.weight"], ["0.bias"], ["fc9.weight"]], "names 'fc9.weight', not a trainable parameter"),
                 ([["0.weight", "0.bias"], ["0.bias"]], "'0.bias' is in fusion plan groups 0 and 1"),
                 ([["0.weight"]], "the fusion plan leaves out 0.bias")]
        for i, (groups, msg) in enumerate(cases):
            path = os.path.join(d, "p%d.tw" % i)
            write_plan(path, groups)
            with self.assertRaises(ValueError) as cm:
                GradSync(net, fusion_plan=path, socket="/nonexistent/none.sock")
            self.assertIn(msg, str(cm.exception))
        write_plan(os.path.join(d, "c.tw"), [["0.weight", "0.bias"]], kind="compression")
        with self.assertRaises(ValueError) as cm:
            GradSync(net, fusion_plan=os.path.join(d, "c.tw"), socket="/nonexistent/none.sock")
        self.assertIn("one plan frame of kind fusion", str(cm.exception))
        with self.assertRaises(NotImplementedError):
            GradSync(net, compression_plan=os.path.join(d, "c.tw"), socket="/nonexistent/none.sock")


if __name__ == "__main__":
    unittest.main()
