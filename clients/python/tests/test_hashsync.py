#!/usr/bin/python3
"""Cross-checks of hashsync's streams from Python: `hashsync gen` frames read with the wire
client are row-sparse tensors, and `hashsync ref` equals numpy's rank-ordered float32 sum (bit
for bit) and torch's sparse sum (to rounding). Needs the hashsync binary ($TRAINWIRE_BIN/hashsync,
<repo>/bin/hashsync, or `go build`); torch tests skip without torch unless
TRAINWIRE_REQUIRE_PYTHON=1.
"""

import io
import os
import shutil
import subprocess
import tempfile
import unittest

import numpy as np

from tests.tools import REPO, binary, free_port  # noqa: E402

from trainwire import wire as W  # noqa: E402



def run(*args):
    return subprocess.run([binary("hashsync")] + list(args), stdout=subprocess.PIPE, check=True).stdout


def sparse_frames(b):
    return [f for f in W.Reader(io.BytesIO(b)) if f["t"] == "sparse"]


class HashsyncStreams(unittest.TestCase):
    WORLD = 3
    GEN = ["--model", "bernoulli", "--rows", "5000", "--width", "4", "--density", "0.05",
           "--overlap", "0.4", "--steps", "2", "--seed", "7"]

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tw-hs-test-")
        cls.files = []
        for r in range(cls.WORLD):
            p = os.path.join(cls.dir, "r%d.tw" % r)
            with open(p, "wb") as f:
                f.write(run("gen", "--rank", str(r), "--world", str(cls.WORLD), *cls.GEN))
            cls.files.append(p)
        cls.ref = sparse_frames(run("ref", *cls.files))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def ranks(self, step):
        out = []
        for p in self.files:
            with open(p, "rb") as f:
                out.append(sparse_frames(f.read())[step])
        return out

    def test_gen_is_row_sparse(self):
        for fr in self.ranks(0):
            self.assertEqual(fr["format"], "coo")
            self.assertEqual(fr["width"], 4)
            self.assertEqual(list(fr["shape"]), [5000, 4])
            idx = W.sparse_indices(fr)
            self.assertTrue(np.all(np.diff(idx.astype(np.int64)) > 0), "ascending unique rows")
            self.assertGreater(len(idx), 100)

    def test_ref_is_rank_ordered_float32_sum(self):
        for step in range(2):
            acc = np.zeros((5000, 4), np.float32)
            for fr in self.ranks(step):
                acc[W.sparse_indices(fr).astype(np.int64)] += W.sparse_values(fr)
            got = np.zeros_like(acc)
            ref = self.ref[step]
            got[W.sparse_indices(ref).astype(np.int64)] = W.sparse_values(ref)
            # float equality is bit equality up to the sign of zero
            self.assertTrue(np.array_equal(acc, got), "step %d: ref differs from numpy's rank-ordered sum" % step)
            nz = np.flatnonzero(np.abs(acc).sum(1))
            self.assertTrue(np.array_equal(nz, W.sparse_indices(ref).astype(np.int64)))

    def test_ref_matches_torch_sparse_sum(self):
        try:
            import torch
        except ImportError:
            if os.environ.get("TRAINWIRE_REQUIRE_PYTHON") == "1":
                raise
            self.skipTest("torch not installed")
        s = None
        for fr in self.ranks(1):
            idx = torch.from_numpy(W.sparse_indices(fr).astype(np.int64)).unsqueeze(0)
            val = torch.from_numpy(W.sparse_values(fr).copy())
            t = torch.sparse_coo_tensor(idx, val, (5000, 4))
            s = t if s is None else s + t
        dense = s.coalesce().to_dense().numpy()
        ref = self.ref[1]
        got = np.zeros((5000, 4), np.float32)
        got[W.sparse_indices(ref).astype(np.int64)] = W.sparse_values(ref)
        np.testing.assert_allclose(got, dense, rtol=1e-6, atol=1e-6)


if __name__ == "__main__":
    unittest.main()
