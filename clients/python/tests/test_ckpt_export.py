"""`ckpt export`: a persisted checkpoint as safetensors files, read back with a small json+numpy
reader (Debian's Python has no safetensors package) and compared bit for bit with the torch tensors
that were saved; then `ckpt import` of those files and `ckpt restore --from persistent`.

Needs the ckpt binary ($TRAINWIRE_BIN/ckpt or <repo>/bin/ckpt) and torch; skipped when either is
missing unless TRAINWIRE_REQUIRE_PYTHON=1.
"""
import json
import os
import shutil
import struct
import subprocess
import tempfile
import time
import unittest

import numpy as np

from tests.test_ckpt import _binary
from tests.tools import free_ports
from trainwire import wire
from trainwire.ckpt import Agent

try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I64": np.int64, "I32": np.int32,
          "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}


def read_safetensors(path):
    """A minimal safetensors reader: u64 header length, JSON header, raw little-endian data."""
    with open(path, "rb") as f:
        b = f.read()
    (n,) = struct.unpack("<Q", b[:8])
    hdr = json.loads(b[8:8 + n])
    meta = hdr.pop("__metadata__", {})
    data = b[8 + n:]
    out = {}
    for name, e in hdr.items():
        lo, hi = e["data_offsets"]
        if e["dtype"] == "BF16":
            raw = np.frombuffer(data[lo:hi], dtype="<u2").astype(np.uint32) << 16
            out[name] = (raw.view(np.float32).reshape(e["shape"]), "BF16", data[lo:hi])
        else:
            out[name] = (np.frombuffer(data[lo:hi], dtype=np.dtype(DTYPES[e["dtype"]]).newbyteorder("<")).reshape(e["shape"]), e["dtype"], data[lo:hi])
    return meta, out


def state(rank):
    g = torch.Generator().manual_seed(rank)
    return {
        "layer.weight": torch.randn(64, 32, generator=g),
        "layer.bias": torch.randn(32, generator=g).double(),
        "emb": torch.randn(10, 8, generator=g).half(),
        "step": torch.tensor([1000 + rank], dtype=torch.int64),
        "mask": torch.rand(7, generator=g) > 0.5,
        "bf": torch.randn(5, 3, generator=g).to(torch.bfloat16),
    }


def tensor_bytes(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


class CkptExportTest(unittest.TestCase):
    def setUp(self):
        self.bin = _binary()
        req = os.environ.get("TRAINWIRE_REQUIRE_PYTHON") == "1"
        if self.bin is None or torch is None:
            if req:
                raise RuntimeError("ckpt binary or torch missing")
            self.skipTest("ckpt binary or torch missing")
        self.dir = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.peers = ",".join("127.0.0.1:%d" % p for p in free_ports(2))
        self.procs = []
        for r in range(2):
            p = subprocess.Popen([self.bin, "agent", "--rank", str(r), "--world", "2", "--run-id", "pyx",
                                  "--peers", self.peers, "--socket", os.path.join(self.dir, "s%d" % r),
                                  "--m", "2", "--buffer", "1MiB", "--memory", "64MiB"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.procs.append(p)
            self.addCleanup(p.wait)
            self.addCleanup(p.kill)
        for r in range(2):
            for _ in range(400):
                if os.path.exists(os.path.join(self.dir, "s%d" % r)):
                    break
                time.sleep(0.025)

    def ckpt(self, *args):
        p = subprocess.run([self.bin] + list(args), capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode())
        return p.stdout

    def test_export_bit_identical_and_import(self):
        states = {r: state(r) for r in range(2)}
        agents = {r: Agent(os.path.join(self.dir, "s%d" % r)) for r in range(2)}
        for r in range(2):
            frames = []
            for k, t in states[r].items():
                if t.dtype == torch.bfloat16:
                    frames.append(wire.dense(k, t.view(torch.int16).numpy(), step=7, rank=r, dtype="bf16"))
                else:
                    frames.append(wire.dense(k, t.numpy(), step=7, rank=r))
            agents[r].save_frames(7, frames)
        for r in range(2):
            agents[r].wait(7)
            agents[r].close()
        pdir = os.path.join(self.dir, "persistent")
        self.ckpt("persist", "--dir", pdir, "--peers", self.peers, "--run-id", "pyx")
        out = os.path.join(self.dir, "export")
        self.ckpt("export", "--dir", pdir, "-o", out)
        for r in range(2):
            meta, got = read_safetensors(os.path.join(out, "rank-%05d.safetensors" % r))
            self.assertEqual(meta["trainwire_ckpt_iter"], "7")
            self.assertEqual(meta["trainwire_ckpt_rank"], str(r))
            self.assertEqual(sorted(got), sorted(states[r]))
            for k, t in states[r].items():
                arr, dt, raw = got[k]
                self.assertEqual(raw, tensor_bytes(t), k)  # bit-identical
                self.assertEqual(list(arr.shape), list(t.shape), k)
                back = torch.from_numpy(arr.copy())
                if t.dtype == torch.bfloat16:
                    self.assertTrue(torch.equal(back.to(torch.bfloat16), t), k)
                else:
                    self.assertTrue(torch.equal(back, t), k)
        # Import the exported files as iteration 100 and restore them.
        files = [os.path.join(out, "rank-%05d.safetensors" % r) for r in range(2)]
        self.ckpt("import", "--dir", pdir, "--iter", "100", *files)
        self.assertIn(b"100", self.ckpt("ls", "--dir", pdir))
        self.ckpt("verify", "--dir", pdir)
        for r in range(2):
            got = self.ckpt("restore", "--from", "persistent", "--dir", pdir, "--rank", str(r), "--world", "2",
                            "--socket", "/nonexistent", "--format", "safetensors")
            with open(files[r], "rb") as f:
                self.assertEqual(got, f.read())


if __name__ == "__main__":
    unittest.main()
