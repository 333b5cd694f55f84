#!/usr/bin/python3
"""The package: `pip install --no-build-isolation --no-index ./clients/python` works offline
(into a venv that sees Debian's msgpack/numpy/xxhash), and `python3 -m trainwire` parses its
arguments with argparse, exiting 80 on bad usage like the Go tools."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tests.tools import PYROOT  # noqa: E402


def cli(args, inp=b"", python=None, cwd=None):
    env = dict(os.environ, PYTHONPATH=PYROOT) if python is None else \
        {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([python or sys.executable, "-m", "trainwire"] + args, input=inp, cwd=cwd,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=120)


class CLI(unittest.TestCase):
    def test_bad_usage_exits_80(self):
        for args in ([], ["bogus"], ["dump", "--values", "x"], ["sample", "--nope"]):
            r = cli(args)
            self.assertEqual(r.returncode, 80, (args, r.stderr))
            self.assertIn(b"usage:", r.stderr)

    def test_commands(self):
        a = cli(["sample"])
        self.assertEqual(a.returncode, 0, a.stderr)
        r = cli(["roundtrip"], a.stdout)
        self.assertEqual((r.returncode, r.stdout), (0, a.stdout), r.stderr)
        r = cli(["roundtrip", "--max-payload", "1000"], a.stdout)
        self.assertEqual(r.returncode, 2)
        self.assertIn(b"exceeds --max-payload 1000", r.stderr)
        self.assertEqual(cli(["--help"]).returncode, 0)


class Install(unittest.TestCase):
    def test_pip_install_offline(self):
        if not shutil.which("pip3") and subprocess.run([sys.executable, "-m", "pip", "--version"],
                                                       capture_output=True).returncode:
            self.skipTest("no pip (Debian: apt-get install python3-pip)")
        d = tempfile.mkdtemp(prefix="tw-pip-")
        src = os.path.join(d, "src")
        try:  # build from a copy: an in-tree build leaves build/ and *.egg-info behind
            shutil.copytree(PYROOT, src, ignore=shutil.ignore_patterns("__pycache__", "tests",
                                                                       "build", "*.egg-info"))
            venv = os.path.join(d, "venv")
            subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], check=True)
            py = os.path.join(venv, "bin", "python")
            r = subprocess.run([py, "-m", "pip", "install", "--no-build-isolation", "--no-index", src],
                               capture_output=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            r = cli(["sample"], python=py, cwd=d)   # not from the source tree
            self.assertEqual(r.returncode, 0, r.stderr)
            r = subprocess.run([py, "-c", "import trainwire, trainwire.wire; print(trainwire.__file__)"],
                               capture_output=True, cwd=d, env={"PATH": os.environ["PATH"]})
            self.assertIn(b"site-packages", r.stdout, r.stderr)
            # the trainwire.torch package and its modules are installed (found, not imported)
            r = subprocess.run([py, "-c", "import importlib.util as u; print(u.find_spec("
                                "'trainwire.torch').origin, u.find_spec('trainwire.torch.straggle').origin)"],
                               capture_output=True, cwd=d, env={"PATH": os.environ["PATH"]})
            self.assertEqual(r.stdout.count(b"site-packages/trainwire/torch/"), 2, r.stdout + r.stderr)
        finally:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
