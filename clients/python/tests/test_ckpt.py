"""ckpt's trainer socket from Python (clients/python/trainwire/ckpt.py) against a real `ckpt agent`.

Needs the ckpt binary: $TRAINWIRE_BIN/ckpt or <repo>/bin/ckpt; skipped when it is missing unless
TRAINWIRE_REQUIRE_PYTHON=1.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
from trainwire.ckpt import Agent, AgentError  # noqa: E402
from trainwire import wire  # noqa: E402
from tests.tools import free_ports  # noqa: E402


def _binary():
    for d in (os.environ.get("TRAINWIRE_BIN"), os.path.join(ROOT, "bin")):
        if d and os.access(os.path.join(d, "ckpt"), os.X_OK):
            return os.path.join(d, "ckpt")
    return None


class _Agents(unittest.TestCase):
    """Two real `ckpt agent` processes on loopback for the class's tests: run_id and extra flags
    per subclass."""

    run_id = ""
    extra = []

    @classmethod
    def setUpClass(cls):
        cls.bin = _binary()
        if cls.bin is None:
            if os.environ.get("TRAINWIRE_REQUIRE_PYTHON") == "1":
                raise RuntimeError("ckpt binary not built (make build)")
            raise unittest.SkipTest("ckpt binary not built")
        cls.dir = tempfile.mkdtemp()
        peers = ",".join("127.0.0.1:%d" % p for p in free_ports(2))
        cls.procs = []
        for r in range(2):
            extra = [a.replace("{dir}", cls.dir).replace("{r}", str(r)) for a in cls.extra]
            cls.procs.append(subprocess.Popen(
                [cls.bin, "agent", "--rank", str(r), "--world", "2", "--run-id", cls.run_id, "--peers", peers,
                 "--socket", os.path.join(cls.dir, "s%d" % r), "--m", "2", "--memory", "64MiB"] + extra,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for r in range(2):
            path = os.path.join(cls.dir, "s%d" % r)
            for _ in range(400):
                if os.path.exists(path):
                    break
                time.sleep(0.025)

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            p.kill()
            p.wait()
        shutil.rmtree(cls.dir, ignore_errors=True)


class CkptAgentTest(_Agents):
    run_id = "py"
    extra = ["--buffer", "1MiB"]

    def agent(self, r):
        return Agent(os.path.join(self.dir, "s%d" % r))

    def test_shm_and_frames(self):
        states = {r: [np.arange(1000, dtype=np.float32) + r, np.full(77, r, dtype=np.int64)] for r in range(2)}
        agents = {r: self.agent(r) for r in range(2)}
        for r in range(2):
            n = agents[r].save_shm(10, states[r])
            self.assertEqual(n, 4000 + 77 * 8)
        for r in range(2):
            self.assertGreaterEqual(agents[r].wait(10), 10)
        got = {}

        def keep(buf):
            got["b"] = bytes(buf)
        it, src = agents[1].restore_shm(keep)
        self.assertEqual((it, src), (10, "local"))
        want = b"".join(a.tobytes() for a in states[1])
        self.assertEqual(got["b"], want)
        # Streamed: the buffer at once, ready(n) before each piece is read.
        pieces = []

        def copy(buf, ready):
            for off in range(0, len(buf), 1000):
                ready(off + 1000)
                pieces.append(bytes(buf[off:off + 1000]))
        it, src = agents[1].restore_shm(copy, stream=True)
        self.assertEqual((it, src), (10, "local"))
        self.assertEqual(b"".join(pieces), want)
        # Tensor frames in, the same frames back.
        for r in range(2):
            agents[r].save_frames(11, [wire.dense("w", np.arange(10, dtype=np.float32) * r, step=11, rank=r)])
        for r in range(2):
            agents[r].wait(11)
        it, src, frames = agents[0].restore_frames()
        self.assertEqual(it, 11)
        self.assertEqual(frames[0]["name"], "w")
        self.assertEqual(len(frames[0]["data"]), 40)
        for a in agents.values():
            a.close()

    def test_refusals(self):
        a = self.agent(0)
        with self.assertRaises(AgentError) as e:
            a.save_shm(1 << 40, [np.zeros(100 << 20, dtype=np.uint8)])  # over --memory
        self.assertIn("memory", str(e.exception))
        a.close()
        a = self.agent(0)
        with self.assertRaises(AgentError) as e:
            a.restore_shm(lambda b: None, it=10 ** 9)
        self.assertIn("not committed", str(e.exception))
        a.close()
        s = socket.socket(socket.AF_UNIX)
        s.connect(os.path.join(self.dir, "s0"))
        s.sendall(b"\x93garbage, not a stream")
        s.settimeout(10)
        self.assertIn(b"bad_input", s.recv(4096))
        s.close()


TRAINER = r"""
import os, sys
import numpy as np
from trainwire.ckpt import Agent
socks, it, scribble = sys.argv[1].split(","), int(sys.argv[2]), sys.argv[3] == "1"
agents = [Agent(s) for s in socks]  # one process trains both ranks here
for r, a in enumerate(agents):
    a.save_shm(it, [np.arange(1 << 16, dtype=np.float32) + it + r])
for a in agents:
    a.wait(it)
a = agents[0]
if os.fork() == 0:  # a DataLoader-like child: it must not inherit the writable mapping
    maps = open("/proc/self/maps").read()
    os._exit(1 if "ckpt-" in maps else 0)
_, status = os.wait()
if os.waitstatus_to_exitcode(status) != 0:
    sys.exit("the forked child inherited the agent's buffer")
if scribble:  # a dying trainer writes into the committed shard through its mapping
    (mm, _), = a._maps.values()
    mm[100] ^= 1
os._exit(0)  # dies without closing anything
"""


class AtRestTest(_Agents):
    """A trainer process saves and dies; the agent checks the shard at rest, and the restarted
    trainer's restore takes that check (status: restores_checked_at_rest) instead of hashing beside
    its copy. What the dying trainer wrote after its commit is still refused."""
    run_id = "rest"
    extra = ["--buffer", "1MiB"]

    def trainer(self, it, scribble):
        env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "clients", "python"))
        socks = ",".join(os.path.join(self.dir, "s%d" % r) for r in range(2))
        out = subprocess.run([sys.executable, "-c", TRAINER, socks, str(it), "1" if scribble else "0"],
                             env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(out.returncode, 0, out.stderr)

    def checked(self):
        a = Agent(os.path.join(self.dir, "s0"))
        try:
            meta, frames = a.status()
        finally:
            a.close()
        counters = [f for f in frames if f.get("name") == "counters"][0]
        return counters["values"]["restores_checked_at_rest"]

    def test_restart_after_death(self):
        self.trainer(5, False)
        want = (np.arange(1 << 16, dtype=np.float32) + 5).tobytes()
        deadline = time.monotonic() + 20
        while True:  # the agent starts its check when it sees the trainer exit: wait for it
            before = self.checked()
            got = {}
            a = Agent(os.path.join(self.dir, "s0"))
            it, src = a.restore_shm(lambda b, ready: (ready(len(b)), got.setdefault("b", bytes(b))), stream=True)
            a.close()
            self.assertEqual((it, src), (5, "local"))
            self.assertEqual(got["b"], want)
            if self.checked() > before or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertGreater(self.checked(), before, "no restore took the at-rest check")

        self.trainer(6, True)
        a = Agent(os.path.join(self.dir, "s0"))
        with self.assertRaises(AgentError) as e:
            a.restore_shm(lambda b, ready: ready(len(b)), stream=True)
        a.close()
        self.assertEqual(e.exception.code, "corrupt", str(e.exception))


class _FakeAgent:
    """A Unix socket that answers one restore with scripted messages (the agent's side of a
    streamed restore), then a release."""

    def __init__(self, answers):
        import threading
        self.dir = tempfile.mkdtemp()
        self.path = os.path.join(self.dir, "s")
        self.ls = socket.socket(socket.AF_UNIX)
        self.ls.bind(self.path)
        self.ls.listen(1)
        self.answers = answers
        self.t = threading.Thread(target=self._serve, daemon=True)
        self.t.start()

    def _msg(self, meta):
        import io
        b = io.BytesIO()
        w = wire.Writer(b, "fake", {k: str(v) for k, v in meta.items()})
        w.close()
        return b.getvalue()

    def _serve(self):
        c, _ = self.ls.accept()
        c.recv(1 << 16)  # the request
        c.sendall(b"".join(self._msg(m) for m in self.answers))
        c.settimeout(10)
        try:
            if c.recv(1 << 16):  # the release
                c.sendall(self._msg({"op": "ok"}))
        except OSError:
            pass
        c.close()

    def close(self):
        self.ls.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class StreamedRestoreTest(unittest.TestCase):
    """restore_shm(stream=True) against scripted agent answers: progress, a move to another
    buffer (use starts again on it), bad counts refused."""

    def buffers(self, n):
        d = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, d, True)
        paths = []
        for name, fill in (("first", 0xAA), ("second", None)):
            p = os.path.join(d, name)
            data = bytes([fill]) * n if fill is not None else bytes(range(256)) * (n // 256)
            with open(p, "wb") as f:
                f.write(data)
            paths.append((p, data))
        return paths

    def test_moved_then_done(self):
        n = 1 << 16
        (p1, _), (p2, want) = self.buffers(n)
        ok = {"op": "ok", "iter": 7, "len": n, "path": p1, "stream": "1", "ready": 0, "source": "peer:1"}
        moved = dict(ok, op="moved", path=p2, source="peer:2")
        fake = _FakeAgent([ok, {"op": "progress", "ready": n // 2}, moved,
                           {"op": "progress", "ready": n}, {"op": "done", "ready": n}])
        self.addCleanup(fake.close)
        a = Agent(fake.path, timeout=10)
        calls, got = [], bytearray(n)

        def use(buf, ready):
            calls.append(len(buf))
            for off in range(0, n, n // 4):
                ready(off + n // 4)
                got[off:off + n // 4] = buf[off:off + n // 4]
        it, src = a.restore_shm(use, stream=True)
        a.close()
        self.assertEqual((it, src), (7, "peer:2"))
        self.assertEqual(len(calls), 2)  # started again on the second buffer
        self.assertEqual(bytes(got), want)

    def test_bad_counts(self):
        n = 4096
        (p1, _), _ = self.buffers(n)
        ok = {"op": "ok", "iter": 1, "len": n, "path": p1, "stream": "1", "ready": 0, "source": "peer:1"}
        for bad in ({"op": "progress", "ready": "x"}, {"op": "progress", "ready": n + 1},
                    {"op": "done", "ready": n - 1}, {"op": "what"}):
            fake = _FakeAgent([ok, bad])
            a = Agent(fake.path, timeout=10)
            with self.assertRaises(AgentError) as e:
                a.restore_shm(lambda buf, ready: ready(len(buf)), stream=True)
            self.assertEqual(e.exception.code, "bad_input", bad)
            a.close()
            fake.close()


class TestInterleave(_Agents):
    """Agents with --interleave: the trainer ticks and reports its comm ops (comm_begin/comm_end,
    no answer awaited); the request/answer stream stays in step and every checkpoint commits."""

    run_id = "pyil"
    extra = ["--buffer", "256KiB", "--interleave", "--spans", "0:0.05,0.08:0.05", "--bandwidth", "200MB",
             "--timeline", "{dir}/tl{r}.jsonl"]

    def test_ticks_comm_and_commit(self):
        agents = [Agent(os.path.join(self.dir, "s%d" % r)) for r in range(2)]
        states = [np.arange(200000, dtype=np.float32) + r for r in range(2)]
        for it in range(4):
            for a in agents:
                a.tick(it, [(0.05, 0.08)] if it else ())
            time.sleep(0.02)
            for a in agents:
                a.comm_begin()
            time.sleep(0.02)
            for a in agents:
                a.comm_end()
            if it:
                for r, a in enumerate(agents):
                    a.save_shm(it, [states[r] + it])
        for a in agents:  # the next iteration starts: iteration 3's chunks go into its spans
            a.tick(4, [(0.05, 0.08)])
        for a in agents:
            self.assertGreaterEqual(a.wait(3), 3)
        got = {}
        it, src = agents[1].restore_shm(lambda b: got.setdefault("b", bytes(b)))
        self.assertEqual((it, src), (3, "local"))
        self.assertEqual(got["b"], (states[1] + 3).tobytes())
        for a in agents:
            a.close()
        # The agents saw the comm ops (the timeline has them) and sent chunks.
        evs = []
        for r in range(2):
            with open(os.path.join(self.dir, "tl%d.jsonl" % r)) as f:
                evs += [json.loads(l) for l in f]
        self.assertTrue(any(e["ev"] == "comm" and e["phase"] == "begin" for e in evs))
        self.assertTrue(any(e["ev"] == "send" for e in evs))


if __name__ == "__main__":
    unittest.main()


class Copies(unittest.TestCase):
    """copy_bytes and copy_out, which steer glibc's large memcpy away from its slow 4 KiB-aliasing
    case: the bytes are the same whatever the offsets, and copy_out puts the copy at the source's
    offset in its page (the fast case)."""

    def test_copies(self):
        from trainwire.ckpt import _ALIAS_MIN, copy_bytes, copy_out
        n = _ALIAS_MIN + 12345  # large enough for the pieces, with a short last one
        src_all = np.random.default_rng(3).integers(0, 256, n + 8192, dtype=np.uint8)
        dst_all = np.zeros(n + 8192, np.uint8)
        for so, do in ((0, 16), (64, 264), (128, 128), (0, 4000), (4032, 0)):
            src, dst = src_all[so:so + n], dst_all[do:do + n]
            dst[:] = 0
            copy_bytes(dst, src)
            self.assertTrue(np.array_equal(dst, src), (so, do))
            out = copy_out(src)
            self.assertTrue(np.array_equal(out, src), so)
            self.assertEqual((out.ctypes.data - src.ctypes.data) % 4096, 0, so)
        small = src_all[:100]
        self.assertTrue(np.array_equal(copy_out(small), small))
