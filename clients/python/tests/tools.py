"""Helpers the Python tests share: where the trainwire binaries are, free ports.

A tool binary is taken from $TRAINWIRE_BIN (CI sets it), else <repo>/bin, else built with
`go build` into a temporary directory (once per tool and process); without any of them the
test is skipped.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PYROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PYROOT))
if PYROOT not in sys.path:
    sys.path.insert(0, PYROOT)

_bins = {}


def binary(tool):
    """Path of the `tool` binary (hashsync, straggle, profiler, ...)."""
    if tool in _bins:
        return _bins[tool]
    for d in (os.environ.get("TRAINWIRE_BIN"), os.path.join(REPO, "bin")):
        if d and os.access(os.path.join(d, tool), os.X_OK):
            _bins[tool] = os.path.join(d, tool)
            return _bins[tool]
    if shutil.which("go"):
        out = tempfile.mkdtemp(prefix="tw-%s-" % tool)
        subprocess.run(["go", "build", "-o", out, "trainwire.dev/tools/" + tool], cwd=REPO, check=True)
        _bins[tool] = os.path.join(out, tool)
        return _bins[tool]
    raise unittest.SkipTest("no %s binary and no go toolchain" % tool)


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    return free_ports(1)[0]


def free_ports(n):
    """n distinct TCP ports on 127.0.0.1 that were free a moment ago: every socket stays bound
    until all n are chosen, so the kernel cannot hand out the same port twice."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()
