#!/usr/bin/python3
"""trainwire.torch's straggle_hook under a real torchrun (4 CPU processes; tests/straggle_worker.py):
rank 3's sidecar is slowed by straggle's own injection (TRAINWIRE_STRAGGLE_SLOW: 25× the base
compute per gradient). In allreduce mode (blocking) every reply is one round of all 4 ranks and the
result equals gloo DDP's; in rna mode rank 3 trains SLOW steps while the others train FAST, and
the replies' own figures show the others were not held back. No timing is asserted.
"""

import os
import shutil
import unittest

import numpy as np

from tests.tools import have_torch, torchrun_class  # noqa: E402

WORLD, FAST, SLOW, LOCKSTEP, SLOW_RANK = 4, 12, 3, 3, 3


@unittest.skipUnless(have_torch(), "no torch")
class StraggleHookUnderTorchrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torchrun_class(cls, "straggle_worker.py", [FAST, SLOW], WORLD,
                       dict(os.environ, TRAINWIRE_STRAGGLE_COMPUTE="20ms",
                            TRAINWIRE_STRAGGLE_SLOW="ranks=%d,s=25" % SLOW_RANK))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

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


if __name__ == "__main__":
    unittest.main()
