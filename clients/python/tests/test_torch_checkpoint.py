#!/usr/bin/python3
"""trainwire.torch.Checkpointer: the shard format round trip, and the restart contract under a
real torchrun with 4 real `ckpt agent`s (tests/ckpt_worker.py): rank 1 is killed with SIGKILL
mid-training, torchrun (--max_restarts 1) restarts every rank, each restores the committed
iteration from its agent and trains on; the job ends with exactly (bit for bit) the parameters
and extra state of an uninterrupted run with the same seed. Twice: the agents keep their memory
(every rank restores from local memory), and rank 1's agent dies with it and a replacement
starts (rank 1 restores from a peer's memory).
"""

import os
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import numpy as np

from tests.tools import binary, free_ports, have_torch, load_json, torchrun  # noqa: E402

WORLD, STEPS, EVERY, KILL = 4, 14, 3, 8


@unittest.skipUnless(have_torch(), "no torch")
class ShardFormat(unittest.TestCase):
    def test_round_trip(self):
        import torch
        from trainwire.torch.checkpoint import pack_state, unpack_state
        st = {"model": {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "b": torch.tensor(1.5),
                        "e": torch.zeros(0, 4), "h": torch.tensor([1, 2], dtype=torch.bfloat16)},
              "optimizer": {"state": {0: {"momentum_buffer": torch.ones(3, dtype=torch.float64)}},
                            "param_groups": [{"lr": 0.1, "params": [0], "nesterov": False, "foreach": None}]},
              "extra": {"ef": np.full(5, 2, np.int64), "name": "x", "raw": b"\x00\x01"}, "iter": 7}
        buf = b"".join(a.tobytes() for a in pack_state(st))
        got = unpack_state(memoryview(buf))
        self.assertEqual(got["iter"], 7)
        for k, t in st["model"].items():
            self.assertEqual((got["model"][k].dtype, got["model"][k].shape), (t.dtype, t.shape), k)
            self.assertTrue(torch.equal(got["model"][k], t), k)
        self.assertTrue(torch.equal(got["optimizer"]["state"][0]["momentum_buffer"], torch.ones(3, dtype=torch.float64)))
        self.assertEqual(got["optimizer"]["param_groups"], st["optimizer"]["param_groups"])
        self.assertTrue(torch.equal(got["extra"]["ef"], torch.full((5,), 2, dtype=torch.int64)))
        self.assertEqual((got["extra"]["name"], got["extra"]["raw"]), ("x", b"\x00\x01"))
        with self.assertRaises(ValueError):
            unpack_state(memoryview(b"NOTACKPT" + buf[8:]))
        with self.assertRaises(ValueError):
            unpack_state(memoryview(buf[:len(buf) - 8]))   # the last tensor cut short

    def test_large_tensor(self):
        """A tensor above the size where unpack_state places its copy (trainwire.ckpt.copy_out):
        the same values, and a tensor that owns its memory beyond the buffer's life."""
        import torch
        from trainwire.ckpt import _ALIAS_MIN
        from trainwire.torch.checkpoint import pack_state, unpack_state
        big = torch.arange(_ALIAS_MIN // 4 + 7, dtype=torch.float32)
        st = {"small": torch.ones(3), "big": big}
        buf = bytearray(b"".join(a.tobytes() for a in pack_state(st)))
        got = unpack_state(memoryview(buf))
        del buf
        self.assertTrue(torch.equal(got["big"], big))
        self.assertTrue(torch.equal(got["small"], torch.ones(3)))


@unittest.skipUnless(have_torch(), "no torch")
class CheckpointerUnderTorchrun(unittest.TestCase):
    def start_agent(self, d, r, peers, log="agent%d.log"):
        log = open(os.path.join(d, log % r), "wb")
        self.addCleanup(log.close)
        p = subprocess.Popen(
            [binary("ckpt"), "agent", "--rank", str(r), "--world", str(WORLD), "--run-id", "pyckpt",
             "--peers", peers, "--socket", os.path.join(d, "s%d" % r), "--m", "2",
             "--memory", "64MiB", "--buffer", "1MiB"], stdout=log, stderr=log)
        self.addCleanup(p.wait)
        self.addCleanup(p.kill)
        return p

    def resume(self, kill_agent):
        """The job with rank 1 killed after step KILL (and its agent too when kill_agent: a
        replacement agent is started as soon as it is gone); returns the restored sources."""
        d = tempfile.mkdtemp(prefix="tw-ckpt-")
        self.addCleanup(shutil.rmtree, d, True)
        peers = ",".join("127.0.0.1:%d" % p for p in free_ports(WORLD))
        agents = [self.start_agent(d, r, peers) for r in range(WORLD)]
        deadline = time.monotonic() + 60
        for r in range(WORLD):
            while not os.path.exists(os.path.join(d, "s%d" % r)):
                self.assertIsNone(agents[r].poll(), "agent %d exited" % r)
                self.assertLess(time.monotonic(), deadline, "agent %d: no socket" % r)
                time.sleep(0.05)
        env = dict(os.environ, TRAINWIRE_CKPT_SOCKET=os.path.join(d, "s{rank}"))
        replaced = []
        if kill_agent:
            env["TW_TEST_AGENT_PID"] = str(agents[1].pid)

            def replace():   # the rank's machine comes back: a new agent, empty memory
                while agents[1].poll() is None and time.monotonic() < deadline + 300:
                    time.sleep(0.02)
                replaced.append(self.start_agent(d, 1, peers, "agent%d-replacement.log"))
            watcher = threading.Thread(target=replace, daemon=True)
            watcher.start()
        out = os.path.join(d, "out")
        os.mkdir(out)
        rc, log = torchrun("ckpt_worker.py", [out, STEPS, EVERY, KILL], WORLD, env,
                           extra=["--max_restarts", "1", "--monitor_interval", "1"])
        self.assertEqual(rc, 0, log[-6000:])
        got = [np.load(os.path.join(out, "r%d.npz" % r)) for r in range(WORLD)]
        info = [load_json(os.path.join(out, "r%d.json" % r)) for r in range(WORLD)]
        if kill_agent:
            self.assertEqual((agents[1].returncode, len(replaced)), (-9, 1))
        starts = {i["start"] for i in info}
        self.assertEqual(len(starts), 1, info)    # every rank restored the same iteration
        start = starts.pop()
        # the second attempt resumed from a committed checkpoint taken before the kill
        self.assertIn(start, range(EVERY, KILL + 1, EVERY), info)
        for r, i in enumerate(info):
            self.assertEqual(i["attempt"], 1, "rank %d ran once: no restart?\n%s" % (r, log[-4000:]))
            self.assertEqual(i["attempts"], [0, 0, 1], i)   # the extra dict came back too
            self.assertEqual(i["saved"], list(range(start + EVERY, STEPS + 1, EVERY)), i)
            # the uninterrupted run (ref_*: the same job without checkpoints, run first)
            np.testing.assert_array_equal(got[r]["params"], got[r]["ref_params"], "rank %d" % r)
            np.testing.assert_array_equal(got[r]["seen"], got[r]["ref_seen"], "rank %d" % r)
        np.testing.assert_array_equal(got[0]["params"], got[3]["params"])
        if kill_agent:
            replaced[0].kill()
            replaced[0].wait()
            with open(os.path.join(d, "agent1-replacement.log")) as f:
                self.replacement_log = f.read()
        return [i["source"] for i in info]

    def test_killed_rank_resumes_from_local_memory(self):
        self.assertEqual(self.resume(False), ["local"] * WORLD)   # the agents kept their memory

    def test_killed_rank_and_agent_resume_from_peer_memory(self):
        src = self.resume(True)
        self.assertEqual([src[0], src[2], src[3]], ["local"] * 3)
        # rank 1's shard came back from a peer's memory: fetched by the restore, or by the new
        # agent as it started (it fetches what it should hold; the restore then finds it local)
        if src[1] == "local":
            self.assertRegex(self.replacement_log, r"fetched a shard this agent holds from a peer.*owner=1 ")
        else:
            self.assertRegex(src[1], r"^peer:[023]$")


if __name__ == "__main__":
    unittest.main()
