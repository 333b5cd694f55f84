#!/usr/bin/python3
"""trainwire.torch's hashsync DDP hook under a real torchrun (4 CPU processes, gloo for DDP's
own process group): per-step gradients equal gloo DDP's, loss curves too, bit for bit what
trainwire's own sums give for the same gradients (zen: `hashsync ref`, rank order; dense:
`hashsync sync --scheme dense`, the ring), and a killed sidecar
makes every rank's backward raise an error naming the tool and the rank, at once. One torchrun
run (tests/ddp_worker.py) feeds every test. Skips without torch unless TRAINWIRE_REQUIRE_PYTHON=1.
"""

import os
import shutil
import subprocess
import unittest

import numpy as np

from tests.tools import binary, free_port, have_torch, torchrun_class  # noqa: E402

from trainwire import Reader, Writer, dense, to_numpy  # noqa: E402

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
                steps = z[mode + ".lockstep"]   # [step, (gloo, hook, local), params]
                self.assertEqual(steps.shape[0], STEPS)
                for s, (g, h, _) in enumerate(steps):
                    tol = 1e-6 * np.abs(g).max()
                    self.assertGreater(tol, 0)
                    self.assertLessEqual(np.abs(h - g).max(), tol, "rank %d %s step %d" % (r, mode, s))
                # every rank ends with the same (averaged) gradients
                np.testing.assert_array_equal(steps[:, 1], self.arrays[0][mode + ".lockstep"][:, 1])

    def streams(self, mode):
        """Every rank's own gradients of the lockstep run as trainwire streams (a dense frame
        per parameter and step), and the hook's results: [rank][step] -> [per parameter]."""
        shapes = self.info[0]["shapes"]
        sizes = [int(np.prod(sh)) for sh in shapes]
        cut = np.cumsum([0] + sizes)
        paths, hooked = [], []
        for r, z in enumerate(self.arrays):
            steps = z[mode + ".lockstep"]
            paths.append(os.path.join(self.dir, "%s-r%d.tw" % (mode, r)))
            with open(paths[-1], "wb") as f, Writer(f, producer="test_torch_hooks") as w:
                for s in range(STEPS):
                    for i, sh in enumerate(shapes):
                        w.write(dense("p%d" % i, steps[s, 2, cut[i]:cut[i + 1]].reshape(sh), step=s, rank=r))
            hooked.append([[steps[s, 1, cut[i]:cut[i + 1]] for i in range(len(shapes))] for s in range(STEPS)])
        return paths, hooked

    def assertBitIdentical(self, frames, hooked, what):
        """frames: the sums, a dense frame per parameter and step; hooked: the hook's averages."""
        frames = [f for f in frames if f["t"] == "dense"]
        n = len(hooked[0][0])
        self.assertEqual(len(frames), STEPS * n)
        for k, f in enumerate(frames):
            s, i = divmod(k, n)
            self.assertEqual((f["step"], f["name"]), (s, "p%d" % i))
            want = to_numpy(f).reshape(-1) * np.float32(1 / WORLD)   # exact: a power of two
            for r in range(WORLD):
                np.testing.assert_array_equal(hooked[r][s][i], want, "%s: rank %d step %d p%d" % (what, r, s, i))

    def test_zen_hook_is_hashsync_ref_bit_for_bit(self):
        # zen adds every row's contributions in rank order, as `hashsync ref` does
        paths, hooked = self.streams("zen")
        with open(paths[0] + ".ref", "w+b") as f:
            subprocess.run([binary("hashsync"), "ref"] + paths, stdout=f, check=True, timeout=120)
            f.seek(0)
            self.assertBitIdentical(list(Reader(f)), hooked, "zen vs hashsync ref")

    def test_dense_hook_is_the_dense_ring_bit_for_bit(self):
        # the dense hook is lib/collective's ring: `hashsync sync --scheme dense` on the same
        # gradients, 4 processes, gives the same bits
        paths, hooked = self.streams("dense")
        master = "127.0.0.1:%d" % free_port()
        procs = []
        for r, path in enumerate(paths):   # outputs to files: a full pipe would stall the ring
            with open(path, "rb") as f, open(path + ".sum", "wb") as o, open(path + ".err", "wb") as e:
                procs.append(subprocess.Popen([binary("hashsync"), "sync", "--scheme", "dense", "--rank",
                                               str(r), "--world", str(WORLD), "--master", master,
                                               "--timeout", "60s"], stdin=f, stdout=o, stderr=e))
        for r, (p, path) in enumerate(zip(procs, paths)):
            with open(path + ".err") as e:
                self.assertEqual(p.wait(timeout=120), 0, "rank %d: %s" % (r, e.read()))
            with open(path + ".sum", "rb") as f:
                self.assertBitIdentical(list(Reader(f)), hooked, "dense vs sync rank %d" % r)

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
