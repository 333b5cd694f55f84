#!/usr/bin/python3
"""trainwire.serve against a real `hashsync serve --world 1` (no torch): sums in place in a memfd
segment, inline tensors, requests in flight, error replies naming the field, and the failure
contract: a killed or silent sidecar fails the pending request with a SidecarError naming the
tool and the rank, at once or within the client's timeout."""

import os
import signal
import subprocess
import tempfile
import time
import unittest

import numpy as np

from tests.tools import binary, stop_process  # noqa: E402

from trainwire.serve import Sidecar, SidecarError, find_binary  # noqa: E402


def start(**kw):
    return Sidecar.start("hashsync", ["--scheme", "dense"], rank=0, world=1,
                         binary=binary("hashsync"), connect_timeout=60, **kw)


class ServeClient(unittest.TestCase):
    def test_sync_in_place_inline_and_in_flight(self):
        with start() as sc:
            c = sc.client
            seg = c.segment(1 << 20)
            a = seg.array(64, 4)
            a[:] = [1, 2, 3, 4]
            rep = c.sync(0, [seg.tensor("w", 64, [2, 2])]).result(30)
            self.assertTrue(rep["ok"])
            np.testing.assert_array_equal(a, [1, 2, 3, 4])   # world 1: the sum is itself
            x = np.arange(6, dtype=np.float32)
            futs = [c.sync(s, [seg.tensor("w", 64, [2, 2]),
                               {"name": "x", "dtype": "f32", "shape": [6], "data": x.tobytes()}],
                           average=True) for s in range(1, 17)]
            reps = [f.result(30) for f in futs]
            self.assertEqual([r["id"] for r in reps], sorted(r["id"] for r in reps))
            np.testing.assert_array_equal(np.frombuffer(reps[-1]["data"][1], "<f4"), x)
            with self.assertRaises(SidecarError) as cm:
                c.sync(17, [seg.tensor("w", 62, [2, 2])]).result(30)
            e = cm.exception
            self.assertEqual((e.code, e.field, e.rank), ("bad_request", "tensors[0].off", 0))
            self.assertIn("hashsync serve of rank 0", str(e))
            self.assertTrue(c.ping(timeout=30)["ok"])        # serving goes on
        self.assertEqual(sc.proc.returncode, 0)              # left with a goodbye
        self.assertFalse(os.path.exists(sc._tmpdir))

    def test_killed_sidecar_fails_at_once(self):
        with start() as sc:
            seg = sc.client.segment(4096)
            sc.proc.kill()
            t0 = time.monotonic()
            with self.assertRaises(SidecarError) as cm:
                sc.client.sync(0, [seg.tensor("w", 0, [4])]).result(30)
            self.assertLess(time.monotonic() - t0, 10)
            self.assertIn("hashsync serve of rank 0", str(cm.exception))
            self.assertIn("killed by SIGKILL", str(cm.exception))
            with self.assertRaises(SidecarError):   # and every later request, without waiting
                sc.client.sync(1, [seg.tensor("w", 0, [4])]).result(1)

    def test_silent_sidecar_times_out(self):
        with start(timeout=1.5) as sc:
            seg = sc.client.segment(4096)
            stop_process(sc.proc.pid)
            try:
                t0 = time.monotonic()
                with self.assertRaises(SidecarError) as cm:
                    sc.client.sync(0, [seg.tensor("w", 0, [4])]).result(30)
                self.assertLess(time.monotonic() - t0, 10)
                self.assertEqual(cm.exception.code, "timeout")
                self.assertIn("no reply to request", str(cm.exception))
            finally:
                os.kill(sc.proc.pid, signal.SIGCONT)

    def test_attach_to_a_launched_sidecar(self):
        d = tempfile.mkdtemp(prefix="tw-attach-")
        p = subprocess.Popen([binary("hashsync"), "serve", "--rank", "0", "--world", "1",
                              "--scheme", "dense", "--socket", os.path.join(d, "hs-{rank}.sock")],
                             stderr=subprocess.DEVNULL)
        try:
            with Sidecar.attach(os.path.join(d, "hs-{rank}.sock"), rank=0, connect_timeout=60) as sc:
                self.assertTrue(sc.client.ping(timeout=30)["ok"])
            self.assertEqual(p.wait(timeout=30), 0)
        finally:
            if p.poll() is None:
                p.kill()
            os.rmdir(d) if os.path.isdir(d) and not os.listdir(d) else None

    def test_find_binary(self):
        old = os.environ.get("TRAINWIRE_BIN")
        try:
            os.environ["TRAINWIRE_BIN"] = os.path.dirname(binary("hashsync"))
            self.assertEqual(find_binary("hashsync"), os.path.abspath(binary("hashsync")))
            os.environ["TRAINWIRE_BIN"] = "/nonexistent"
            if not any(os.access(os.path.join(x, "nosuchtool"), os.X_OK)
                       for x in os.environ.get("PATH", "").split(":")):
                with self.assertRaises(FileNotFoundError) as cm:
                    find_binary("nosuchtool")
                self.assertIn("TRAINWIRE_BIN", str(cm.exception))
        finally:
            if old is None:
                os.environ.pop("TRAINWIRE_BIN", None)
            else:
                os.environ["TRAINWIRE_BIN"] = old


class TorchEnv(unittest.TestCase):
    def test_master_port_plus_one(self):
        try:
            from trainwire.torch import torch_env
        except ImportError:
            if os.environ.get("TRAINWIRE_REQUIRE_PYTHON") == "1":
                raise
            self.skipTest("no torch")
        env = {"RANK": "2", "WORLD_SIZE": "4", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
        self.assertEqual(torch_env(env), (2, 4, "10.0.0.1:29501"))
        env["TRAINWIRE_MASTER_PORT"] = "4000"
        self.assertEqual(torch_env(env), (2, 4, "10.0.0.1:4000"))
        self.assertEqual(torch_env({}), (None, None, None))


if __name__ == "__main__":
    unittest.main()
