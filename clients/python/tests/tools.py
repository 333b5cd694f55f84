"""Helpers the Python tests share: where the trainwire binaries are, free ports.

A tool binary is taken from $TRAINWIRE_BIN (CI sets it), else <repo>/bin, else built with
`go build` into a temporary directory (once per tool and process); without any of them the
test is skipped.
"""

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

import numpy as np

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


def _ephemeral_low():
    """The first port of the kernel's ephemeral range (32768 when it does not say)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def stop_process(pid, timeout=10):
    """SIGSTOPs pid and returns once every one of its threads is stopped. kill() only queues the
    signal: the stop reaches the other threads when the thread that takes it runs, and on a
    loaded machine the others may go on for milliseconds (a sidecar answered a request after
    os.kill(pid, SIGSTOP) had returned)."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    task = "/proc/%d/task" % pid
    while time.monotonic() < deadline:
        states = []
        for t in os.listdir(task):
            try:
                with open(os.path.join(task, t, "stat")) as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])
            except OSError:
                pass
        if states and all(st in ("T", "t") for st in states):
            return
        time.sleep(0.001)
    raise RuntimeError("process %d not stopped %d s after SIGSTOP" % (pid, timeout))


def free_launcher_port():
    """A port P on 127.0.0.1 such that P and P+1 were free a moment ago (below the ephemeral
    range): a launcher's MASTER_PORT, torch's store on P and the sidecars' rendezvous on P+1."""
    first, top = 10000, _ephemeral_low()
    for _ in range(1000):
        p = random.randrange(first, top - 1)
        socks = []
        try:
            for q in (p, p + 1):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", q))
            return p
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free pair of consecutive ports on 127.0.0.1 in [%d, %d)" % (first, top))


def free_ports(n):
    """n distinct TCP ports on 127.0.0.1 that were free a moment ago, drawn from below the
    ephemeral range (as lib/cli/clitest's): a port the kernel hands out for ("127.0.0.1", 0) is an
    ephemeral one, which any outgoing connection may take as its source port before the process
    that was given it binds it. Every socket stays bound until all n are chosen."""
    first, top = 10000, _ephemeral_low()
    socks, ports = [], []
    try:
        for _ in range(1000 * n):
            if len(ports) == n:
                return ports
            p = random.randrange(first, top)
            if p in ports:
                continue
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                s.close()
                continue
            socks.append(s)
            ports.append(p)
        raise RuntimeError("no %d free ports on 127.0.0.1 in [%d, %d)" % (n, first, top))
    finally:
        for s in socks:
            s.close()


def have_torch():
    """Whether torch.distributed imports; with TRAINWIRE_REQUIRE_PYTHON=1 its absence fails."""
    try:
        import torch.distributed  # noqa: F401
        return True
    except ImportError:
        if os.environ.get("TRAINWIRE_REQUIRE_PYTHON") == "1":
            raise
        return False


def torchrun(worker, args, world=4, env=None, timeout=400, extra=()):
    """Runs tests/WORKER ARGS under `python -m torch.distributed.run` with world CPU processes
    (trainwire's binaries and this package in the environment); returns (exit code, output)."""
    port = free_launcher_port()   # torch's store; the sidecars' rendezvous takes port+1
    env = dict(os.environ if env is None else env, PYTHONPATH=PYROOT)
    env.setdefault("TRAINWIRE_BIN", os.path.dirname(binary("hashsync")))
    # torch 1.13's launcher spells flags with underscores; its default redirects crash on
    # Python 3.11, hence --redirects/--tee (tools/hashsync/e2e_test.go TestCheckUnderTorchrun)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world),
           "--master_addr", "127.0.0.1", "--master_port", str(port),
           "--redirects", "9:0", "--tee", "9:0"] + list(extra) + \
        [os.path.join(HERE, worker)] + [str(a) for a in args]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def load_json(path):
    with open(path) as f:
        return json.load(f)


def launch_ranks(worker, args, world=4, env=None):
    """Starts tests/WORKER ARGS as world processes with torch.distributed's variables set by hand
    (no launcher agent to tear the survivors down when a rank dies), each in its own session so
    a test or the rank itself can kill it with its sidecar. Returns the Popen objects; each
    one's output goes to a temporary file, p.log (read_log)."""
    port = free_launcher_port()
    procs = []
    for r in range(world):
        e = dict(os.environ if env is None else env, PYTHONPATH=PYROOT, RANK=str(r),
                 WORLD_SIZE=str(world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        e.setdefault("TRAINWIRE_BIN", os.path.dirname(binary("hashsync")))
        for k in ("LOCAL_RANK", "TORCHELASTIC_RUN_ID", "TRAINWIRE_SERVE_SOCKET"):
            e.pop(k, None)
        log = tempfile.NamedTemporaryFile(prefix="tw-rank%d-" % r, suffix=".log", delete=False)
        p = subprocess.Popen([sys.executable, os.path.join(HERE, worker)] + [str(a) for a in args],
                             env=e, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        p.log = log.name
        procs.append(p)
    return procs


def read_log(p):
    try:
        with open(p.log, "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def torchrun_class(cls, worker, args, world, env=None):
    """setUpClass of a test class fed by one torchrun of tests/WORKER OUTDIR ARGS whose ranks
    write OUTDIR/r<rank>.npz and .json: sets cls.dir, cls.log, cls.arrays, cls.info (rank order);
    tearDownClass removes cls.dir."""
    cls.dir = tempfile.mkdtemp(prefix="tw-%s-" % os.path.splitext(worker)[0])
    rc, cls.log = torchrun(worker, [cls.dir] + list(args), world, env)
    if rc != 0:
        raise AssertionError("torchrun exited %d:\n%s" % (rc, cls.log[-6000:]))
    cls.arrays = [np.load(os.path.join(cls.dir, "r%d.npz" % r)) for r in range(world)]
    cls.info = [load_json(os.path.join(cls.dir, "r%d.json" % r)) for r in range(world)]
