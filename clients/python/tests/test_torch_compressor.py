#!/usr/bin/python3
"""trainwire.torch's compressor_hook under a real torchrun (4 CPU processes;
tests/compressor_worker.py): fp16 on the compressed ring gives gloo DDP's gradients within fp16's
rounding; topk with residual error feedback keeps every rank's replica equal; and the EF state
saved by the hook (save_every) and handed to a new hook (state_in) resumes the run exactly: the
second half's synced gradients equal the uncut run's bit for bit; split_hook sends the embedding
to hashsync (exact) and the linear layer to the compressor (fp16), in one DDP hook.
"""

import shutil
import unittest

import numpy as np

from tests.tools import have_torch, torchrun_class  # noqa: E402

WORLD, STEPS = 4, 6


@unittest.skipUnless(have_torch(), "no torch")
class CompressorHookUnderTorchrun(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torchrun_class(cls, "compressor_worker.py", [STEPS], WORLD)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_fp16_ring_is_gloo_within_fp16(self):
        for r in range(WORLD):
            for s, (g, h) in enumerate(self.arrays[r]["fp16"]):
                # fp16 keeps 11 bits; the ring rounds at every hop of 4 ranks
                self.assertLessEqual(np.abs(h - g).max(), 4e-3 * np.abs(g).max(), "rank %d step %d" % (r, s))
                self.assertGreater(np.abs(h - g).max(), 0, "rank %d step %d: no compression happened" % (r, s))

    def test_topk_replicas_stay_equal(self):
        for r in range(1, WORLD):
            np.testing.assert_array_equal(self.arrays[r]["topk.params"], self.arrays[0]["topk.params"])
            np.testing.assert_array_equal(self.arrays[r]["topk"], self.arrays[0]["topk"])

    def test_ef_state_resumes_exactly(self):
        half = STEPS // 2
        for r in range(WORLD):
            self.assertEqual(self.info[r]["saved_step"], half - 1)
            self.assertGreater(self.info[r]["saved_bytes"], 0)
            np.testing.assert_array_equal(self.arrays[r]["topk.resumed"], self.arrays[r]["topk"][half:],
                                          err_msg="rank %d" % r)

    def test_split_hook_sparse_by_zen_dense_by_fp16(self):
        emb = 5000 * 8   # the embedding's elements come first in parameters()
        for r in range(WORLD):
            self.assertGreater(self.info[r]["sparse_requests"], 0)
            self.assertGreater(self.info[r]["dense_requests"], 0)
            for s, (g, h) in enumerate(self.arrays[r]["split"]):
                # the embedding: Zen's exact sum, gloo's up to summation order
                self.assertLessEqual(np.abs(h[:emb] - g[:emb]).max(), 1e-6 * np.abs(g[:emb]).max(), "rank %d step %d" % (r, s))
                # the linear layer: fp16 on the ring
                d = np.abs(h[emb:] - g[emb:]).max()
                self.assertLessEqual(d, 4e-3 * np.abs(g[emb:]).max(), "rank %d step %d" % (r, s))
                self.assertGreater(d, 0, "rank %d step %d: the dense part was not compressed" % (r, s))


if __name__ == "__main__":
    unittest.main()
