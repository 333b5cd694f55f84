#!/usr/bin/python3
"""trainwire.torch's straggle_hook and GradSync under one real torchrun (4 CPU processes;
tests/mlp_worker.py).

GradSync (plan-driven gradient sync on `hashsync serve` without DDP): with a fusion plan of 3
groups (not in backprop order) and with the default one group per parameter, every step's
gradients equal gloo DDP's (max abs diff <= 1e-6 x max|g|), every group goes out from the
gradient hooks during backward, one request per group and step. Bad plans are refused before any
sidecar starts.

straggle_hook: rank 3's sidecar is slowed by straggle's own injection (TRAINWIRE_STRAGGLE_SLOW: 25× the base
compute per gradient). In allreduce mode (blocking) every reply is one round of all 4 ranks and the
result equals gloo DDP's; in groups mode every reply is one round of a pair of ranks and each
rank's gradient is its own plus exactly one other rank's, over the world, the pairing mutual; in
rna mode rank 3 trains SLOW steps while the others train FAST, and
the replies' own figures show the others were not held back. No timing is asserted.
"""

import os
import shutil
import tempfile
import unittest

import numpy as np

from tests.tools import have_torch, torchrun_class  # noqa: E402

from trainwire import Writer, plan  # noqa: E402

WORLD, FAST, SLOW, LOCKSTEP, SLOW_RANK, GRADSYNC_STEPS, GROUP_ROUNDS = 4, 12, 3, 3, 3, 4, 3
GROUPS = [["fc3.weight", "fc1.bias"], ["fc2.weight", "fc2.bias", "fc3.bias"], ["fc1.weight"]]


def write_plan(path, groups, kind="fusion"):
    with open(path, "wb") as f, Writer(f, producer="test_torch_mlp") as w:
        w.write(plan(kind, "test", [[i, i] for i in range(len(groups))], [{"names": g} for g in groups]))


@unittest.skipUnless(have_torch(), "no torch")
class MLPUnderTorchrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        d = tempfile.mkdtemp(prefix="tw-plan-")
        try:
            write_plan(os.path.join(d, "plan.tw"), GROUPS)
            torchrun_class(cls, "mlp_worker.py", [os.path.join(d, "plan.tw"), FAST, SLOW], WORLD,
                           dict(os.environ, TRAINWIRE_STRAGGLE_COMPUTE="20ms",
                                TRAINWIRE_STRAGGLE_SLOW="ranks=%d,s=25" % SLOW_RANK))
        finally:
            shutil.rmtree(d, ignore_errors=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_gradsync_gradients_equal_gloo_ddp(self):
        for r in range(WORLD):
            for name in ("plan", "default"):
                steps = self.arrays[r]["gradsync." + name]     # [step, (gloo, gradsync), params]
                self.assertEqual(steps.shape[0], GRADSYNC_STEPS)
                for s, (g, h) in enumerate(steps):
                    self.assertLessEqual(np.abs(h - g).max(), 1e-6 * np.abs(g).max(), "rank %d %s step %d" % (r, name, s))
                np.testing.assert_array_equal(steps[:, 1], self.arrays[0]["gradsync." + name][:, 1])

    def test_gradsync_groups_sent_from_the_hooks(self):
        for r in range(WORLD):
            info = self.info[r]
            self.assertEqual(info["gradsync.plan"], {"groups": 3, "requests": 3 * GRADSYNC_STEPS, "sent_in_backward": [3] * GRADSYNC_STEPS})
            self.assertEqual(info["gradsync.default"], {"groups": 6, "requests": 6 * GRADSYNC_STEPS, "sent_in_backward": [6] * GRADSYNC_STEPS})

    def test_allreduce_mode_is_ddp_average(self):
        for r in range(WORLD):
            a = self.info[r]["allreduce"]
            self.assertEqual(a["requests"], LOCKSTEP)
            self.assertEqual([(x["rounds"], x["contributors"], x["contributed"]) for x in a["replies"]],
                             [(1, WORLD, 1)] * LOCKSTEP, "rank %d" % r)
            self.assertEqual([x["round"] for x in a["replies"]], list(range(1, LOCKSTEP + 1)))
            got, want = self.arrays[r]["allreduce"], self.arrays[r]["gloo"]
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max(),
                                       err_msg="rank %d" % r)
            # one round per reply, every rank the same: the replicas are bit-identical
            np.testing.assert_array_equal(got, self.arrays[0]["allreduce"])

    def test_groups_mode_applies_the_group_sum(self):
        for r in range(WORLD):
            g = self.info[r]["groups"]
            self.assertEqual(g["requests"], GROUP_ROUNDS)
            self.assertEqual([(x["round"], x["rounds"], x["contributors"], x["contributed"]) for x in g["replies"]],
                             [(k + 1, 1, 2, 1) for k in range(GROUP_ROUNDS)], "rank %d" % r)
        for k in range(GROUP_ROUNDS):
            # each rank got (its gradient + one other rank's) / world, and the pairing is mutual
            partner = {}
            for r in range(WORLD):
                got, own = self.arrays[r]["groups"][k]
                tol = 1e-6 * np.abs(got).max()
                found = [p for p in range(WORLD) if p != r and
                         np.abs(got - (own + self.arrays[p]["groups"][k][1]) / WORLD).max() <= tol]
                self.assertEqual(len(found), 1, "rank %d round %d: partners %s" % (r, k + 1, found))
                partner[r] = found[0]
            for r, p in partner.items():
                self.assertEqual(partner[p], r, "round %d: %s" % (k + 1, partner))

    def test_rna_runs_to_completion_and_the_slow_rank_holds_nobody_back(self):
        slow = self.info[SLOW_RANK]["rna"]
        self.assertEqual((slow["steps"], slow["requests"], len(slow["replies"])), (SLOW, SLOW, SLOW))
        for r in range(WORLD):
            if r == SLOW_RANK:
                continue
            rna = self.info[r]["rna"]
            self.assertEqual((rna["steps"], rna["requests"], len(rna["replies"])), (FAST, FAST, FAST))
            rounds = sum(x["rounds"] for x in rna["replies"])
            contributors = sum(x["contributors"] for x in rna["replies"])
            # each gradient lands in exactly one round, so at most SLOW of the rounds this rank
            # applied held rank 3's gradient: the rest ran without waiting for it
            self.assertGreaterEqual(rounds, FAST, "rank %d" % r)
            self.assertGreater(rounds, SLOW)
            self.assertLess(contributors, WORLD * rounds, "rank %d: every round had every rank" % r)
            for x in rna["replies"]:
                self.assertGreaterEqual(x["rounds"], 1)
                self.assertTrue(1 <= x["contributors"] <= WORLD * x["rounds"], x)
                self.assertLessEqual(x["contributed"], x["rounds"])
            self.assertEqual([x["round"] for x in rna["replies"]],
                             sorted(x["round"] for x in rna["replies"]))
            self.assertTrue(np.isfinite(self.arrays[r]["rna"]).all())
            self.assertFalse(np.array_equal(self.arrays[r]["rna"], self.arrays[r]["gloo"]))


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
